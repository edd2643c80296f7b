/**
 * The price table `npm run bench -- --suite cost` multiplies the counted calls by: list prices in
 * us-east-1, on-demand, after the free tiers (a steady-state deployment outgrows them), one entry
 * per billable unit, each with the pricing page it comes from and when it was read.
 *
 * How they were read: this machine reaches no AWS page (only the npm registry and Debian's
 * mirrors), so each rate was read on 2026-12-02 from a secondary source quoting the official
 * page (named in `via`); check `page` before relying on a figure. A price the table does not
 * have (`usd: null`) is reported as a count with no dollars, never guessed.
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
const REGION = 'us-east-1';

export const PRICES = {
  sqsStandardRequest: {
    usd: 0.4,
    per: 1e6,
    unit: 'SQS standard request (each 64 KiB chunk of payload is one request)',
    region: REGION,
    page: 'https://aws.amazon.com/sqs/pricing/',
    read: READ,
    via: 'cloudburn.io "Amazon SQS Pricing" (March 2026); unanswered.io SQS pricing guide',
    note: 'first 100 billion requests a month; the first million each month are free',
  },
  sqsFifoRequest: {
    usd: 0.5,
    per: 1e6,
    unit: 'SQS FIFO request (64 KiB chunks)',
    region: REGION,
    page: 'https://aws.amazon.com/sqs/pricing/',
    read: READ,
    via: 'cloudburn.io "Amazon SQS Pricing" (March 2026)',
  },
  lambdaRequest: {
    usd: 0.2,
    per: 1e6,
    unit: 'Lambda request (invocation)',
    region: REGION,
    page: 'https://aws.amazon.com/lambda/pricing/',
    read: READ,
    via: 'kodekloud "AWS Lambda Pricing"; the README\'s cost-at-rest figures use the same rate',
  },
  lambdaArmGbSecond: {
    usd: 0.0000133334,
    per: 1,
    unit: 'Lambda GB-second, arm64 (infra/constructs/NodeFunction.ts: ARM_64)',
    region: REGION,
    page: 'https://aws.amazon.com/lambda/pricing/',
    read: READ,
    via: 'cloudchipr "AWS Lambda Pricing Breakdown" (first 7.5 billion GB-s a month)',
  },
  httpApiRequest: {
    usd: 1.0,
    per: 1e6,
    unit: 'API Gateway HTTP API request (up to 512 KB; first 300 million a month)',
    region: REGION,
    page: 'https://aws.amazon.com/api-gateway/pricing/',
    read: READ,
    via: 'not confirmed by a second source here: the rate AWS has listed since HTTP APIs launched',
  },
  dataApiRequest: {
    usd: 0.35,
    per: 1e6,
    unit: 'RDS Data API request (first billion a month)',
    region: REGION,
    page: 'https://aws.amazon.com/rds/aurora/pricing/',
    read: READ,
    via: "the README's cost-at-rest figures (session of 2026-12-01); not re-read here",
  },
  secretsManagerCall: {
    usd: 0.05,
    per: 1e4,
    unit: 'Secrets Manager API call',
    region: REGION,
    page: 'https://aws.amazon.com/secrets-manager/pricing/',
    read: READ,
    via: 'not confirmed by a second source here',
  },
  ssmStandardCall: {
    usd: 0,
    per: 1,
    unit: 'Systems Manager GetParameter/PutParameter, standard parameter and throughput',
    region: REGION,
    page: 'https://aws.amazon.com/systems-manager/pricing/',
    read: READ,
    via: 'docs/aws-facts.md (standard parameters: no charge)',
  },
  eventBridgeScheduledRule: {
    usd: 0,
    per: 1,
    unit: 'EventBridge scheduled-rule invocation (an AWS service event on the default bus)',
    region: REGION,
    page: 'https://aws.amazon.com/eventbridge/pricing/',
    read: READ,
    via: 'wring.co "AWS EventBridge pricing guide" (AWS service events: free); EventBridge Scheduler, not used here, is $1.00 per million after 14 million a month',
  },
  lambdaInvokeApi: {
    usd: 0,
    per: 1,
    unit: "Lambda Invoke API call (the kick): billed as the target function's request, counted there",
    region: REGION,
    page: 'https://aws.amazon.com/lambda/pricing/',
    read: READ,
    via: 'Lambda bills the invocation, not the API call',
  },
  natGatewayHour: {
    usd: 0.045,
    per: 1,
    unit: 'NAT gateway hour (the RabbitMQ stack has one)',
    region: REGION,
    page: 'https://aws.amazon.com/vpc/pricing/',
    read: READ,
    via: 'not confirmed by a second source here',
  },
  natGatewayGb: {
    usd: 0.045,
    per: 1,
    unit: 'GB processed by the NAT gateway (the functions reaching AWS APIs from the VPC)',
    region: REGION,
    page: 'https://aws.amazon.com/vpc/pricing/',
    read: READ,
    via: 'not confirmed by a second source here',
  },
  amazonMqBrokerHour: {
    usd: null,
    per: 1,
    unit: 'Amazon MQ for RabbitMQ broker hour, mq.m7g.medium single-instance (infra/config.ts DEFAULT_BROKER)',
    region: REGION,
    page: 'https://aws.amazon.com/amazon-mq/pricing/',
    read: READ,
    via: 'not found in any source reachable here: the hours are reported, not priced; add the rate to price them',
  },
} satisfies Record<string, Price>;

export type PriceId = keyof typeof PRICES;
