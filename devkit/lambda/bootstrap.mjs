// The runtime side of the local Lambda runner (devkit/lambda/LambdaFunction.ts): what the
// nodejs24.x runtime's bootstrap does in an execution environment, reduced to what a function
// can observe. Plain JavaScript on purpose: it runs on the bare Node 24 binary, with nothing of
// the repository resolvable (no tsx, no loader), beside a handler that must bring everything but
// the AWS SDK in its own bundle.
//
// - The handler is loaded as the runtime loads it: `_HANDLER` "index.handler" is module `index`
//   in `LAMBDA_TASK_ROOT`, tried as `index`, `index.js`, `index.mjs`, `index.cjs`, then imported.
// - Bare specifiers an ES module cannot resolve from the task root are looked up in the
//   `NODE_PATH` folders, as the Lambda Node.js runtimes do since nodejs18.x (Lambda DG, "Building
//   Lambda functions with Node.js": ES module handlers; that is how the runtime's AWS SDK in
//   /var/runtime/node_modules is importable). CommonJS `require` reads NODE_PATH natively.
// - Invocations come through the Lambda Runtime API (`AWS_LAMBDA_RUNTIME_API`): next, response,
//   error, init/error (Lambda DG, "Using the Lambda runtime API for custom runtimes"), with the
//   deadline, request id and function ARN from the `next` response's headers.
import { existsSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { basename, join, resolve as resolvePath } from 'node:path';
import { pathToFileURL } from 'node:url';

const api = `http://${process.env.AWS_LAMBDA_RUNTIME_API}/2018-06-01/runtime`;
const taskRoot = process.env.LAMBDA_TASK_ROOT ?? process.cwd();
const nodePath = (process.env.NODE_PATH ?? '').split(':').filter(Boolean);

registerHooks({
  resolve(specifier, context, nextResolve) {
    try {
      return nextResolve(specifier, context);
    } catch (err) {
      const bare = !/^(\.|\/|[a-z]+:)/i.test(specifier);
      if (!bare || err?.code !== 'ERR_MODULE_NOT_FOUND') throw err;
      // a NODE_PATH entry `D/node_modules` holds `D/node_modules/<specifier>`: resolve it as a
      // module in `D` would (only node_modules folders hold packages)
      for (const folder of nodePath) {
        if (basename(folder) !== 'node_modules') continue;
        try {
          const parentURL = pathToFileURL(join(folder, '..', '[node_path].mjs')).href;
          return nextResolve(specifier, { ...context, parentURL });
        } catch {
          // not there
        }
      }
      throw err;
    }
  },
});

async function post(path, body, headers = {}) {
  const res = await fetch(`${api}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  await res.arrayBuffer();
}

/**
 * Logs an error as the runtime does (`log`'s fields, then the error's), then posts it to the
 * Runtime API's `path` (none: only logged) with its type, or `headerType`, as the error type.
 */
async function reportError(err, fallbackType, log, path, headerType) {
  const e = err instanceof Error ? err : new Error(String(err));
  const body = {
    errorType: e.name || fallbackType,
    errorMessage: e.message,
    stackTrace: (e.stack ?? '')
      .split('\n')
      .slice(1)
      .map((l) => l.trim()),
  };
  console.error(JSON.stringify({ level: 'ERROR', ...log, ...body }));
  if (!path) return;
  await post(path, JSON.stringify(body), {
    'Lambda-Runtime-Function-Error-Type': headerType ?? body.errorType,
  });
}

class RuntimeError extends Error {
  constructor(name, message) {
    super(message);
    this.name = name;
  }
}

async function loadHandler() {
  const handlerString = process.env._HANDLER ?? '';
  if (handlerString.includes('..')) {
    throw new RuntimeError(
      'Runtime.MalformedHandlerName',
      `'${handlerString}' is not a valid handler name`,
    );
  }
  const file = basename(handlerString);
  const moduleRoot = handlerString.slice(0, handlerString.length - file.length);
  const match = /^([^.]*)\.(.*)$/.exec(file);
  if (!match) throw new RuntimeError('Runtime.MalformedHandlerName', 'Bad handler');
  const [, moduleName, path] = match;
  const base = resolvePath(taskRoot, moduleRoot, moduleName);
  const found = ['', '.js', '.mjs', '.cjs'].map((ext) => `${base}${ext}`).find(existsSync);
  if (!found) {
    throw new RuntimeError(
      'Runtime.ImportModuleError',
      `Error: Cannot find module '${moduleName}'\nRequire stack:\n- ${taskRoot}`,
    );
  }
  let mod;
  try {
    mod = await import(pathToFileURL(found).href);
  } catch (err) {
    if (err instanceof SyntaxError)
      throw new RuntimeError('Runtime.UserCodeSyntaxError', String(err));
    if (err?.code === 'ERR_MODULE_NOT_FOUND' || err?.code === 'MODULE_NOT_FOUND') {
      throw new RuntimeError('Runtime.ImportModuleError', String(err));
    }
    throw err;
  }
  const fn = path.split('.').reduce((o, k) => o?.[k], mod);
  if (typeof fn !== 'function') {
    throw new RuntimeError(
      'Runtime.HandlerNotFound',
      `${handlerString} is undefined or not exported`,
    );
  }
  return fn;
}

let handler;
try {
  handler = await loadHandler();
} catch (err) {
  await reportError(err, 'Runtime.ImportModuleError', { message: 'init failed' }, '/init/error');
  process.exit(1);
}

let current;
const fail = (type) => async (err) => {
  // The runtime reports an error nobody awaited on the invocation in flight, then exits: the
  // environment is not reused (Runtime.ExitError for the next one).
  const path = current ? `/invocation/${current}/error` : undefined;
  await reportError(err, type, { message: type }, path).catch(() => {});
  process.exit(129);
};
process.on('uncaughtException', fail('Runtime.UncaughtException'));
process.on('unhandledRejection', fail('Runtime.UnhandledPromiseRejection'));

for (;;) {
  const next = await fetch(`${api}/invocation/next`);
  const requestId = next.headers.get('lambda-runtime-aws-request-id');
  const deadline = Number(next.headers.get('lambda-runtime-deadline-ms'));
  const event = await next.json();
  current = requestId;
  const trace = next.headers.get('lambda-runtime-trace-id');
  if (trace) process.env._X_AMZN_TRACE_ID = trace;
  else delete process.env._X_AMZN_TRACE_ID;
  const context = {
    callbackWaitsForEmptyEventLoop: true,
    functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
    functionVersion: process.env.AWS_LAMBDA_FUNCTION_VERSION,
    invokedFunctionArn: next.headers.get('lambda-runtime-invoked-function-arn'),
    memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
    awsRequestId: requestId,
    logGroupName: process.env.AWS_LAMBDA_LOG_GROUP_NAME,
    logStreamName: process.env.AWS_LAMBDA_LOG_STREAM_NAME,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
  };
  try {
    const result = await handler(event, context);
    await post(`/invocation/${requestId}/response`, JSON.stringify(result ?? null));
  } catch (err) {
    const log = { message: 'Invoke Error', requestId };
    await reportError(err, 'Error', log, `/invocation/${requestId}/error`, 'Unhandled');
  }
  current = undefined;
}
