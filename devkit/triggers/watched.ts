import type { Context } from 'aws-lambda';

/** The handler, with `onError` told of each failed invocation before the trigger reacts. */
export const watched = <E, R>(
  handler: (event: E, context: Context) => Promise<R>,
  onError: ((err: Error) => void) | undefined,
) =>
  !onError
    ? handler
    : async (event: E, context: Context): Promise<R> => {
        try {
          return await handler(event, context);
        } catch (err) {
          onError(err as Error);
          throw err;
        }
      };
