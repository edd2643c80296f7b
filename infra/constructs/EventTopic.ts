import type { IGrantable } from 'aws-cdk-lib/aws-iam';
import { Alias } from 'aws-cdk-lib/aws-kms';
import { type ITopic, type Subscription, SubscriptionFilter, Topic } from 'aws-cdk-lib/aws-sns';
import { SqsSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { SQS_ATTRIBUTES, snsFilterPolicy } from '../../shared/transport/sqs/constants.js';

/**
 * A stream's SNS topic, for fan-out on SQS (docs/design.md, "Fan-out on SQS"): the relay
 * publishes the stream there, and every subscriber's queue, another team's too, is subscribed to
 * it. TLS only; encrypted with SNS's AWS-managed key (the publishers and SNS's delivery to SQS are
 * in the account, which that key's policy allows; no alarm publishes here).
 */
export function eventTopic(
  scope: Construct,
  id: string,
  props: { topicName?: string } = {},
): Topic {
  return new Topic(scope, id, {
    ...(props.topicName ? { topicName: props.topicName } : {}),
    enforceSSL: true,
    masterKey: Alias.fromAliasName(scope, `${id}Key`, 'alias/aws/sns'),
  });
}

/**
 * Subscribes `queue` to a stream's `topic`: raw message delivery (the envelope and its
 * attributes as published, what the consumer reads from a queue the relay sends to directly),
 * the event types it takes as a filter policy where they can be written as one, and its
 * `deadLetterQueue` (the consumer's parking queue) for what SNS cannot deliver: without one SNS
 * discards a message it could not deliver for a client-side reason (a queue policy or key that
 * refuses it, a deleted queue).
 */
export function subscribeQueue(
  topic: ITopic,
  queue: IQueue,
  options: { types?: readonly string[]; deadLetterQueue?: IQueue } = {},
): Subscription {
  const policy = options.types ? snsFilterPolicy(options.types) : undefined;
  const conditions = policy
    ? (JSON.parse(policy)[SQS_ATTRIBUTES.eventType] as (string | { prefix: string })[])
    : [];
  const allowlist = conditions.filter((c): c is string => typeof c === 'string');
  const matchPrefixes = conditions.flatMap((c) => (typeof c === 'string' ? [] : [c.prefix]));
  const subscription = new SqsSubscription(queue, {
    rawMessageDelivery: true,
    ...(policy
      ? {
          filterPolicy: {
            [SQS_ATTRIBUTES.eventType]: SubscriptionFilter.stringFilter({
              ...(allowlist.length ? { allowlist } : {}),
              ...(matchPrefixes.length ? { matchPrefixes } : {}),
            }),
          },
        }
      : {}),
    ...(options.deadLetterQueue ? { deadLetterQueue: options.deadLetterQueue } : {}),
  });
  return topic.addSubscription(subscription);
}

/** Lets `grantee` send to a queue, or publish to a topic. */
export function grantSendTo(target: IQueue | ITopic, grantee: IGrantable): void {
  if ('queueArn' in target) target.grantSendMessages(grantee);
  else target.grantPublish(grantee);
}
