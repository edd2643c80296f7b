import { RDSDataClient } from '@aws-sdk/client-rds-data';
import { DataApiDatabase } from 'reliable-messaging-serverless/data-api';

/** What the service's Lambda entries share: the variables the constructs set, read once. */
export const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};

/** The function's Data API login (`DATA_API_*`: the construct's `database` or the cluster's). */
export const dataApiDatabase = () =>
  new DataApiDatabase(
    { client: new RDSDataClient({}) },
    {
      resourceArn: env('DATA_API_RESOURCE_ARN'),
      secretArn: env('DATA_API_SECRET_ARN'),
      database: env('DATA_API_DATABASE'),
    },
  );
