import { RDSDataClient } from '@aws-sdk/client-rds-data';
import {
  type DataApiServer,
  type DataApiServerOptions,
  startDataApiServer,
} from '../../devkit/emulators/dataApiServer.js';
import { DataApiDatabase, type DataApiSettings } from '../../shared/db/data-api/DataApiDatabase.js';

/**
 * The RDS Data API adapter on a test database: the local endpoint speaking the Data API's wire
 * protocol, reached by the real SDK client over HTTP.
 */
export async function localDataApi(
  databaseUrl: string,
  databaseName: string,
  options: Omit<DataApiServerOptions, 'databaseUrl'> = {},
  settings: DataApiSettings = {},
): Promise<{
  db: DataApiDatabase;
  server: DataApiServer;
  client: RDSDataClient;
  close(): Promise<void>;
}> {
  const server = await startDataApiServer({ ...options, databaseUrl });
  const client = new RDSDataClient({
    endpoint: server.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 1,
  });
  const db = new DataApiDatabase(
    { client },
    {
      resourceArn: 'arn:aws:rds:us-east-1:000000000000:cluster:local',
      secretArn: 'arn:aws:secretsmanager:us-east-1:000000000000:secret:local',
      database: databaseName,
    },
    settings,
  );
  return {
    db,
    server,
    client,
    async close() {
      client.destroy();
      await server.close();
    },
  };
}
