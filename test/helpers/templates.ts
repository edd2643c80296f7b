import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { type PipelineConfig, pipelineConfig } from '../../infra/config.js';
import { dataApiAccess } from '../../infra/constructs/index.js';
import { DataStack } from '../../infra/stacks/DataStack.js';
import { RabbitPipelineStack } from '../../infra/stacks/RabbitPipelineStack.js';
import { SqsPipelineStack } from '../../infra/stacks/SqsPipelineStack.js';

/**
 * The data stack and both pipeline stacks synthesized in-process with `config` (default: what
 * `cdk synth` deploys), without bundling: the templates the infra tests read.
 */
export function synthPipelines(config: PipelineConfig = pipelineConfig()) {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const data = new DataStack(app, 'Data');
  const database = dataApiAccess(data.cluster, data.databaseName, data.dbSecrets);
  const { inventoryDatabaseName } = data;
  const rabbit = new RabbitPipelineStack(app, 'Rabbit', {
    config,
    database,
    inventoryDatabaseName,
  });
  const sqs = new SqsPipelineStack(app, 'Sqs', { config, database, inventoryDatabaseName });
  return {
    data: Template.fromStack(data),
    rabbit: Template.fromStack(rabbit),
    sqs: Template.fromStack(sqs),
  };
}
