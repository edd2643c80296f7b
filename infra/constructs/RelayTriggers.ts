import { Duration, type Stack } from 'aws-cdk-lib';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import { StringParameter } from 'aws-cdk-lib/aws-ssm';
import type { PipelineConfig } from '../config.js';
import type { NodeFunction } from './NodeFunction.js';

/**
 * How the outbox relay is invoked (docs/outbox-relay.md, "Running it"):
 * - kicked: each producer (place-order, reserve-inventory) invokes it asynchronously right after
 *   a COMMIT that wrote outbox rows (`RELAY_FUNCTION_NAME`, `lambda:InvokeFunction`);
 * - ticked: a 1-minute schedule, whose invocation publishes the heartbeat and reads the outboxes
 *   only when its state (an SSM parameter) says rows were left or a quiet pipeline's sweep is due;
 * - bounded, when `reservedConcurrency` is set (opt-in: it fails the deploy on an account with
 *   too little unreserved concurrency): that many invocations at most. An asynchronous event is
 *   not retried and kept at most a minute (a kick throttled for longer is covered by the relays
 *   running then). Unreserved, the kicks alone bound it (docs/outbox-relay.md, "Bounded").
 */
export function relayTriggers(
  stack: Stack,
  props: { relay: NodeFunction; producers: NodeFunction[]; config: PipelineConfig['relay'] },
): { state: StringParameter; schedule: Rule } {
  const { relay, producers, config } = props;
  const state = new StringParameter(stack, 'RelayState', {
    // named (one per stack): a generated name is fine for CloudFormation, but moto's cannot make one
    parameterName: `/${stack.stackName}/outbox-relay/state`,
    description:
      "The outbox relay's state between invocations (last run on the database, last traffic, rows left): written by the relay only.",
    stringValue: '{}',
  });
  state.grantRead(relay);
  state.grantWrite(relay);
  relay.addEnvironment('RELAY_STATE_PARAMETER', state.parameterName);
  // 0 leaves it unreserved: an account can reserve only its unreserved concurrency minus 100
  // (docs/aws-facts.md), which a new account with a low limit does not have
  if (config.reservedConcurrency > 0) {
    (relay.node.defaultChild as CfnFunction).reservedConcurrentExecutions =
      config.reservedConcurrency;
  }
  relay.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: Duration.minutes(1) });
  for (const producer of config.kick ? producers : []) {
    // the function itself, unqualified (grantInvoke would add its versions, `arn:…:*`)
    producer.addToRolePolicy(
      new PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [relay.functionArn] }),
    );
    producer.addEnvironment('RELAY_FUNCTION_NAME', relay.functionName);
    producer.addEnvironment('RELAY_KICK_INTERVAL_MS', String(config.kickIntervalMs));
  }
  const schedule = new Rule(stack, 'RelaySchedule', {
    schedule: Schedule.rate(Duration.minutes(1)),
    targets: [new LambdaFunction(relay)],
  });
  return { state, schedule };
}
