import { describe, expect, it } from 'vitest';
import { DATABASE_LOGIN_OUTPUTS, STACK_OUTPUTS } from '../../infra/stackOutputs.js';
import { synthPipelines } from '../helpers/templates.js';

/**
 * The outputs `cli … --stack <name>` reads (docs/cli.md), on both pipeline stacks: the HTTP API,
 * the relay, and the databases as the functions reach them through the Data API (cluster, each
 * service's database, one secret per side's login, the one that side's functions use).
 */
describe('CDK: the pipeline stacks name what the CLI reaches', () => {
  const t = synthPipelines();

  it.each(['sqs', 'rabbit'] as const)(
    "%s: ApiUrl, RelayFunction, the cluster, each service's database and each side's login",
    (which) => {
      const template = t[which];
      const outputs = template.toJSON().Outputs as Record<string, { Value: unknown }>;
      for (const key of Object.values(STACK_OUTPUTS)) expect(outputs, key).toHaveProperty(key);
      const functions = Object.values(template.findResources('AWS::Lambda::Function')).map(
        (f) => (f.Properties?.Environment?.Variables ?? {}) as Record<string, unknown>,
      );
      const env = (service: string) =>
        functions.find((v) => v.POWERTOOLS_SERVICE_NAME === service) as Record<string, unknown>;
      const placeOrder = env('place-order');
      // the very values the functions' Data API settings carry
      expect(outputs[STACK_OUTPUTS.databaseClusterArn]?.Value).toEqual(
        placeOrder.DATA_API_RESOURCE_ARN,
      );
      expect(outputs[STACK_OUTPUTS.databaseName]?.Value).toEqual(placeOrder.DATA_API_DATABASE);
      const reserve = which === 'sqs' ? 'reserve-inventory-sqs' : 'reserve-inventory-rabbitmq';
      expect(outputs[STACK_OUTPUTS.inventoryDatabaseName]?.Value).toEqual(
        env(reserve).INVENTORY_DATA_API_DATABASE,
      );
      expect(outputs[STACK_OUTPUTS.inventoryDatabaseName]?.Value).not.toEqual(
        outputs[STACK_OUTPUTS.databaseName]?.Value,
      );
      // each side's output is the secret that side's function logs in with
      const byLogin = {
        orders: 'place-order',
        inventory: reserve,
        relay: 'outbox-relay',
        maintenance: 'maintenance',
      };
      for (const [login, key] of Object.entries(DATABASE_LOGIN_OUTPUTS)) {
        expect(outputs[key]?.Value, key).toEqual(
          env(byLogin[login as keyof typeof byLogin]).DATA_API_SECRET_ARN,
        );
      }
      const secrets = Object.values(DATABASE_LOGIN_OUTPUTS).map((k) =>
        JSON.stringify(outputs[k]?.Value),
      );
      expect(new Set(secrets).size).toBe(4);
    },
  );
});
