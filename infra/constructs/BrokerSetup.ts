import { createHash } from 'node:crypto';
import { CustomResource } from 'aws-cdk-lib';
import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Provider } from 'aws-cdk-lib/custom-resources';
import type { Construct, IDependable } from 'constructs';
import type { Retention, RetryBudget } from '../../shared/config/env.js';
import { functionEnvironment } from '../../shared/config/functionEnvironment.js';
import { type AmazonMqAccess, brokerFunctionEnvironment } from './amazonMq.js';
import { deployProvider } from './deployProvider.js';
import { NodeFunction, type NodeFunctionProps } from './NodeFunction.js';

/** The broker's setup: your setup handler, the broker as its administrator, what it declares. */
export interface BrokerSetupProps extends Omit<NodeFunctionProps, 'timeoutSeconds' | 'network'> {
  /** Default 120. */
  timeoutSeconds?: number;
  /** The broker, as its administrator (the user Amazon MQ creates with it). */
  broker: AmazonMqAccess;
  /**
   * The broker user the setup creates or updates from its secret, with permissions on the
   * topology's names only: the user the other functions and the event sources read the broker with.
   */
  pipelineUser?: ISecret;
  /**
   * What the function declares (e.g. `declaredTopology(topology, budget, retention)`): a digest of it is the
   * custom resource's version, so that a change applies it again on deploy.
   */
  declared: unknown;
  /** The retry budget and retention it declares the topology for (its environment). */
  budget?: RetryBudget;
  retention?: Retention;
  /** What must exist before the topology is applied (the broker). */
  dependsOn?: readonly IDependable[];
}

/**
 * The function that applies a RabbitMQ broker's topology and policies through the management API
 * (`entry`: a handler built like this repository's `functions/broker-setup`), run on every deploy
 * that changes what it declares: beside it in `scope`, a CDK Provider (`BrokerSetupProvider`) and
 * the custom resource (`BrokerTopology`, `Custom::BrokerTopology`) whose version is a digest of
 * `declared`. It runs as the broker's administrator in the broker's private subnets, and creates
 * the pipeline user from its secret. One per scope (its provider's and resource's ids are fixed).
 */
export class BrokerSetup extends NodeFunction {
  /** The CDK Provider framework that invokes it on deploy. */
  readonly provider: Provider;
  /** The applied topology: what an event source on one of its queues depends on. */
  readonly topology: CustomResource;

  constructor(scope: Construct, id: string, props: BrokerSetupProps) {
    const { broker, pipelineUser, declared, budget, retention, dependsOn, ...fn } = props;
    super(scope, id, {
      ...fn,
      timeoutSeconds: props.timeoutSeconds ?? 120,
      network: broker.network,
      environment: {
        ...brokerFunctionEnvironment(broker, { budget, retention }),
        ...functionEnvironment(
          pipelineUser ? { brokerPipelineSecretArn: pipelineUser.secretArn } : {},
        ),
        ...props.environment,
      },
    });
    broker.secret.grantRead(this);
    pipelineUser?.grantRead(this);
    this.provider = deployProvider(scope, 'BrokerSetupProvider', this);
    this.topology = new CustomResource(scope, 'BrokerTopology', {
      serviceToken: this.provider.serviceToken,
      resourceType: 'Custom::BrokerTopology',
      properties: {
        version: createHash('sha256').update(JSON.stringify(declared)).digest('hex').slice(0, 16),
        vhost: broker.vhost,
      },
    });
    for (const dependency of dependsOn ?? []) this.topology.node.addDependency(dependency);
  }
}
