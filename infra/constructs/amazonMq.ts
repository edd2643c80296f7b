import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Retention, RetryBudget } from '../../shared/config/env.js';
import {
  type FunctionEnvironment,
  functionEnvironment,
} from '../../shared/config/functionEnvironment.js';
import type { FunctionNetwork } from './NodeFunction.js';

/**
 * How a function reaches an Amazon MQ for RabbitMQ broker as one of its users: the broker, the
 * user's secret (`{"username","password"}`: its ARN goes into the environment, never its value),
 * the endpoints the broker reports, the vhost, and the private network the broker admits.
 */
export interface AmazonMqAccess {
  /** The broker's ARN (what an Amazon MQ event source reads). */
  brokerArn: string;
  /** The broker's id (the runbook's `aws mq describe-broker --broker-id`). */
  brokerId?: string;
  /** The broker user's secret. */
  secret: ISecret;
  /** `amqps://host:5671`, as the broker reports it (`Fn.select(0, broker.attrAmqpEndpoints)`). */
  amqpEndpoint: string;
  /** The management API (`https://host`, e.g. `Fn.select(0, broker.attrConsoleUrLs)`). */
  managementEndpoint: string;
  /** The RabbitMQ virtual host. */
  vhost: string;
  /** The private subnets (with egress) and the security group the broker admits. */
  network: FunctionNetwork;
}

/**
 * The environment of a function on the broker: the transport, the budget and retention where
 * given, and the broker as `access`'s user.
 */
export function brokerFunctionEnvironment(
  access: AmazonMqAccess,
  settings: { budget?: RetryBudget | undefined; retention?: Retention | undefined },
): FunctionEnvironment {
  return {
    ...functionEnvironment({
      transport: 'rabbitmq',
      ...(settings.budget ? { budget: settings.budget } : {}),
      ...(settings.retention ? { retention: settings.retention } : {}),
    }),
    ...amazonMqEnvironment(access),
  };
}

/** The environment of a function that reaches the broker as `access`'s user. */
export function amazonMqEnvironment(access: AmazonMqAccess): FunctionEnvironment {
  return functionEnvironment({
    broker: {
      secretArn: access.secret.secretArn,
      amqpEndpoint: access.amqpEndpoint,
      managementEndpoint: access.managementEndpoint,
      vhost: access.vhost,
    },
  });
}
