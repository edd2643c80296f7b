import { App } from 'aws-cdk-lib';
import { addPipeline } from './pipelineApp.js';

/**
 * The CDK app: `npx cdk synth|deploy -c transport=sqs|rabbitmq` (stacks: infra/pipelineApp.ts).
 */
const app = new App();
addPipeline(app);
app.synth();
