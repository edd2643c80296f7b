import { createHash } from 'node:crypto';
import type { Message } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';

/**
 * The record the Lambda SQS event source gives a function for a received message (every attribute
 * value a string): what the local emulations of the event source hand the Lambda driver.
 */
export function toSqsRecord(m: Message, queueArn: string, region = 'us-east-1'): SQSRecord {
  const attributes = (m.Attributes ?? {}) as Record<string, string>;
  return {
    messageId: m.MessageId as string,
    receiptHandle: m.ReceiptHandle as string,
    body: m.Body ?? '',
    attributes: {
      ApproximateReceiveCount: attributes.ApproximateReceiveCount ?? '1',
      SentTimestamp: attributes.SentTimestamp ?? String(Date.now()),
      SenderId: attributes.SenderId ?? 'local',
      ApproximateFirstReceiveTimestamp:
        attributes.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
      ...(attributes.MessageGroupId ? { MessageGroupId: attributes.MessageGroupId } : {}),
      ...(attributes.SequenceNumber ? { SequenceNumber: attributes.SequenceNumber } : {}),
      ...(attributes.MessageDeduplicationId
        ? { MessageDeduplicationId: attributes.MessageDeduplicationId }
        : {}),
    },
    messageAttributes: Object.fromEntries(
      Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [
        k,
        {
          ...(v.StringValue !== undefined ? { stringValue: v.StringValue } : {}),
          ...(v.BinaryValue !== undefined
            ? { binaryValue: Buffer.from(v.BinaryValue).toString('base64') }
            : {}),
          stringListValues: [],
          binaryListValues: [],
          dataType: v.DataType as string,
        },
      ]),
    ),
    md5OfBody:
      m.MD5OfBody ??
      createHash('md5')
        .update(m.Body ?? '')
        .digest('hex'),
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: region,
  };
}
