/**
 * The price table `npm run bench -- --suite cost` (and `cost-at-rest`) multiplies the counts by:
 * list prices in us-east-1, on-demand, the free tiers not subtracted (a steady-state deployment
 * outgrows them; at rest the docs say what they take off), one entry per billable unit, each with
 * the pricing page it comes from and when it was read.
 *
 * How they were read: this machine reaches no AWS page (only the npm registry and Debian's
 * mirrors), so each rate was read (2026-12-02; those added for the month at rest 2026-12-04) from
 * a secondary source quoting the official page, named in `via` (where it is a public repository's
 * cost model rather than a page, `via` says so); check `page` before relying on a figure. A price
 * the table does not have (`usd: null`) is reported as a count with no dollars, never guessed.
 */
export interface Price {
  /** US dollars per `per` units; null: not in the table (the count is reported, not priced). */
  usd: number | null;
  per: number;
  unit: string;
  region: 'us-east-1';
  /** The official pricing page. */
  page: string;
  /** When and through what the rate was read. */
  read: string;
  via: string;
  note?: string;
}

const READ = '2026-12-02';
/** The rates the at-rest month added (bench/atRest.ts), read the same way. */
const READ_AT_REST = '2026-12-04';

/** An entry of the table, its `region` set here: every rate is us-east-1's. */
const rate = ({ usd, per, unit, ...rest }: Omit<Price, 'region'>): Price => ({
  usd,
  per,
  unit,
  region: 'us-east-1',
  ...rest,
});

export const PRICES = {
  sqsStandardRequest: rate({
    usd: 0.4,
    per: 1e6,
    unit: 'SQS standard request (each 64 KiB chunk of payload is one request)',
    page: 'https://aws.amazon.com/sqs/pricing/',
    read: READ,
    via: 'cloudburn.io "Amazon SQS Pricing" (March 2026); unanswered.io SQS pricing guide',
    note: 'first 100 billion requests a month; the first million each month are free',
  }),
  sqsFifoRequest: rate({
    usd: 0.5,
    per: 1e6,
    unit: 'SQS FIFO request (64 KiB chunks)',
    page: 'https://aws.amazon.com/sqs/pricing/',
    read: READ,
    via: 'cloudburn.io "Amazon SQS Pricing" (March 2026)',
  }),
  lambdaRequest: rate({
    usd: 0.2,
    per: 1e6,
    unit: 'Lambda request (invocation)',
    page: 'https://aws.amazon.com/lambda/pricing/',
    read: READ,
    via: 'kodekloud "AWS Lambda Pricing"; the README\'s cost-at-rest figures use the same rate',
  }),
  lambdaArmGbSecond: rate({
    usd: 0.0000133334,
    per: 1,
    unit: 'Lambda GB-second, arm64 (infra/constructs/NodeFunction.ts: ARM_64)',
    page: 'https://aws.amazon.com/lambda/pricing/',
    read: READ,
    via: 'cloudchipr "AWS Lambda Pricing Breakdown" (first 7.5 billion GB-s a month)',
  }),
  httpApiRequest: rate({
    usd: 1.0,
    per: 1e6,
    unit: 'API Gateway HTTP API request (up to 512 KB; first 300 million a month)',
    page: 'https://aws.amazon.com/api-gateway/pricing/',
    read: READ,
    via: 'not confirmed by a second source here: the rate AWS has listed since HTTP APIs launched',
  }),
  dataApiRequest: rate({
    usd: 0.35,
    per: 1e6,
    unit: 'RDS Data API request (first billion a month)',
    page: 'https://aws.amazon.com/rds/aurora/pricing/',
    read: READ,
    via: 'the rate the cost-at-rest figures used since 2026-12-01; not re-read here',
  }),
  secretsManagerCall: rate({
    usd: 0.05,
    per: 1e4,
    unit: 'Secrets Manager API call',
    page: 'https://aws.amazon.com/secrets-manager/pricing/',
    read: READ,
    via: 'not confirmed by a second source here',
  }),
  ssmStandardCall: rate({
    usd: 0,
    per: 1,
    unit: 'Systems Manager GetParameter/PutParameter, standard parameter and throughput',
    page: 'https://aws.amazon.com/systems-manager/pricing/',
    read: READ,
    via: 'docs/aws-facts.md (standard parameters: no charge)',
  }),
  eventBridgeScheduledRule: rate({
    usd: 0,
    per: 1,
    unit: 'EventBridge scheduled-rule invocation (an AWS service event on the default bus)',
    page: 'https://aws.amazon.com/eventbridge/pricing/',
    read: READ,
    via: 'wring.co "AWS EventBridge pricing guide" (AWS service events: free); EventBridge Scheduler, not used here, is $1.00 per million after 14 million a month',
  }),
  lambdaInvokeApi: rate({
    usd: 0,
    per: 1,
    unit: "Lambda Invoke API call (the kick): billed as the target function's request, counted there",
    page: 'https://aws.amazon.com/lambda/pricing/',
    read: READ,
    via: 'Lambda bills the invocation, not the API call',
  }),
  natGatewayHour: rate({
    usd: 0.045,
    per: 1,
    unit: 'NAT gateway hour (the RabbitMQ stack has one)',
    page: 'https://aws.amazon.com/vpc/pricing/',
    read: READ,
    via: 'a public cost model in a GitHub repository (an Amazon MQ demo cost gate, 2026-09-01 rates: $0.045 an hour, its public IPv4 address $0.005)',
  }),
  natGatewayGb: rate({
    usd: 0.045,
    per: 1,
    unit: 'GB processed by the NAT gateway (the functions reaching AWS APIs from the VPC)',
    page: 'https://aws.amazon.com/vpc/pricing/',
    read: READ,
    via: 'not confirmed by a second source here',
  }),
  amazonMqBrokerHour: rate({
    usd: 0.1367,
    per: 1,
    unit: 'Amazon MQ for RabbitMQ broker instance-hour, mq.m7g.medium (infra/config.ts DEFAULT_BROKER)',
    page: 'https://aws.amazon.com/amazon-mq/pricing/',
    read: READ_AT_REST,
    via: 'two public cost models in GitHub repositories (an Amazon MQ demo cost gate: three mq.m7g.medium brokers $0.4101/h, reviewed 2026-09-01 rates), consistent with mq.m7g.large below (half of it); a third note put mq.m7g.medium near $66 a month ($0.09/h): the sources disagree, check the page',
    note: 'a cluster deployment is three broker instances, each billed',
  }),
  amazonMqM7gLargeHour: rate({
    usd: 0.2734,
    per: 1,
    unit: 'Amazon MQ for RabbitMQ broker instance-hour, mq.m7g.large (`-c broker=production`: three of them)',
    page: 'https://aws.amazon.com/amazon-mq/pricing/',
    read: READ_AT_REST,
    via: 'two public cost models in GitHub repositories (us-east-1 on-demand, checked October 2026; one lists mq.m5.large at $0.288, the long-standing rate)',
  }),
  secretsManagerSecretMonth: rate({
    usd: 0.4,
    per: 1,
    unit: 'Secrets Manager secret-month (prorated; a secret scheduled for deletion is not billed)',
    page: 'https://aws.amazon.com/secrets-manager/pricing/',
    read: READ_AT_REST,
    via: 'hivebook.wiki "AWS Secrets Manager" ($0.40 per secret per month + $0.05 per 10k API calls)',
  }),
  kmsKeyMonth: rate({
    usd: 1.0,
    per: 1,
    unit: 'KMS customer-managed key-month (prorated hourly)',
    page: 'https://aws.amazon.com/kms/pricing/',
    read: READ_AT_REST,
    via: 'stored copy of the page itself; cloudburn.io "AWS KMS Pricing" (March 2026)',
    note: 'automatic rotation (on: the alarm topic key) adds $1/month for each new key material, the first a year after creation',
  }),
  cloudWatchAlarmMetricMonth: rate({
    usd: 0.1,
    per: 1,
    unit: 'CloudWatch standard-resolution alarm metric-month (each metric an alarm evaluates)',
    page: 'https://aws.amazon.com/cloudwatch/pricing/',
    read: READ_AT_REST,
    via: 'c3x.dev "aws_cloudwatch_metric_alarm cost"; a bill quoted by amazonwebshark.com ("$0.10 Per Alarm Metric Month (Standard Resolution)")',
    note: 'the always-free tier covers 10 alarm metrics an account',
  }),
  cloudWatchCustomMetricMonth: rate({
    usd: 0.3,
    per: 1,
    unit: 'CloudWatch custom metric-month (each metric name and dimension values; first 10,000), prorated by the hour it is sent in',
    page: 'https://aws.amazon.com/cloudwatch/pricing/',
    read: READ_AT_REST,
    via: 'c3x.dev "CloudWatch custom metrics cost"; sensedeep.com; the proration is the page\'s wording, not re-read here',
    note: 'the always-free tier covers 10 metrics an account',
  }),
  cloudWatchLogsIngestedGb: rate({
    usd: 0.5,
    per: 1,
    unit: 'CloudWatch Logs GB ingested, standard log class (Lambda logs, EMF lines; VPC flow logs delivered to CloudWatch Logs: the same rate for the first 10 TB)',
    page: 'https://aws.amazon.com/cloudwatch/pricing/',
    read: READ_AT_REST,
    via: 'c3x.dev "CloudWatch Logs cost optimization" (us-east-1, June 2026); aws-samples sample-cfm-tips-mcp (vended logs, first 10 TB)',
    note: 'the always-free tier covers 5 GB a month; storage ($0.03 per GB-month) is not counted',
  }),
  auroraAcuHour: rate({
    usd: 0.12,
    per: 1,
    unit: 'Aurora Serverless v2 ACU-hour (Aurora Standard)',
    page: 'https://aws.amazon.com/rds/aurora/pricing/',
    read: READ_AT_REST,
    via: 'c3x.dev "Aurora Serverless v2 cost"; factualminds.com; awsnegotiations.com (~$0.12, us-east-1); the README\'s earlier estimate used the same rate',
  }),
  auroraStorageGbMonth: rate({
    usd: 0.1,
    per: 1,
    unit: 'Aurora storage GB-month (Aurora Standard)',
    page: 'https://aws.amazon.com/rds/aurora/pricing/',
    read: READ_AT_REST,
    via: 'awsnegotiations.com "Aurora Serverless v2 Pricing" (~$0.10 per GB-month)',
    note: 'backup storage up to the cluster volume is free (Aurora UG, "Understanding Amazon Aurora backup storage usage")',
  }),
  publicIpv4Hour: rate({
    usd: 0.005,
    per: 1,
    unit: "public IPv4 address-hour (the NAT gateway's Elastic IP)",
    page: 'https://aws.amazon.com/vpc/pricing/',
    read: READ_AT_REST,
    via: 'AWS Networking blog "Identify and optimize public IPv4 address usage on AWS" (charged since 2024-02-01); doit.com ($0.005/h)',
  }),
} satisfies Record<string, Price>;

export type PriceId = keyof typeof PRICES;

/** An amount in USD as the tables print it (four decimals under a cent); null: not priced. */
export const usd = (n: number | null) =>
  n === null ? 'not priced' : `$${n.toFixed(n < 0.01 && n > 0 ? 4 : 2)}`;
