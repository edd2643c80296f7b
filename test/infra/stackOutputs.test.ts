import { describe, expect, it } from 'vitest';
import { DATABASE_LOGIN_OUTPUTS, STACK_OUTPUTS } from '../../infra/stackOutputs.js';
import { synthPipelines } from '../helpers/templates.js';

/**
 * The outputs `cli … --stack <name>` reads (docs/cli.md), on both pipeline stacks: the HTTP API,
 * the relay, and the database as the functions reach it through the Data API (cluster, database,
 * one secret per side's login: today every side's is the app login).
 */
describe('CDK: the pipeline stacks name what the CLI reaches', () => {
  const t = synthPipelines();

  it.each(['sqs', 'rabbit'] as const)(
    "%s: ApiUrl, RelayFunction, the cluster, database and each side's login",
    (which) => {
      const template = t[which];
      const outputs = template.toJSON().Outputs as Record<string, { Value: unknown }>;
      for (const key of Object.values(STACK_OUTPUTS)) expect(outputs, key).toHaveProperty(key);
      const functions = template.findResources('AWS::Lambda::Function');
      const placeOrder = Object.values(functions).find(
        (f) =>
          (f.Properties?.Environment?.Variables as Record<string, unknown> | undefined)
            ?.DATA_API_SECRET_ARN,
      )?.Properties?.Environment?.Variables as Record<string, unknown>;
      // the very values the functions' Data API settings carry
      expect(outputs[STACK_OUTPUTS.databaseClusterArn]?.Value).toEqual(
        placeOrder.DATA_API_RESOURCE_ARN,
      );
      expect(outputs[STACK_OUTPUTS.databaseName]?.Value).toEqual(placeOrder.DATA_API_DATABASE);
      for (const key of Object.values(DATABASE_LOGIN_OUTPUTS)) {
        expect(outputs[key]?.Value, key).toEqual(placeOrder.DATA_API_SECRET_ARN);
      }
    },
  );
});
