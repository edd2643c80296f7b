import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { Sha256 } from '@smithy/core/checksum';
import { SignatureV4 } from '@smithy/signature-v4';
import { type Command, Option } from 'commander';
import { STACK_OUTPUTS } from '../../infra/stackOutputs.js';
import { env } from './common.js';
import { describeStack, OperatorError, outputOf, stackOption } from './stack.js';

/** Where the orders API is: a deployed stack's (signed) or a local one (`npm run dev`, unsigned). */
interface ApiTarget {
  base: string;
  /** SigV4 for an IAM-authorized HTTP API: the stack's region. */
  signIn?: string;
}

async function apiTarget(opts: { stack?: string; url?: string }): Promise<ApiTarget> {
  if (opts.stack) {
    const stack = await describeStack(opts.stack);
    return { base: outputOf(stack, STACK_OUTPUTS.apiUrl), signIn: stack.region };
  }
  return { base: opts.url ?? `http://127.0.0.1:${env.PORT}` };
}

export interface ApiResponse {
  status: number;
  statusText: string;
  body: string;
}

/**
 * One request to the orders API. To a deployed stack it is signed with SigV4 for `execute-api`
 * (IAM authorization) in the stack's region, with the credentials of the SDK's default chain, by
 * the SDK's own signer: the signed headers are host, content-type, x-amz-date, the content hash
 * and, for temporary credentials, x-amz-security-token.
 */
export async function apiRequest(
  target: ApiTarget,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<ApiResponse> {
  const url = new URL(`${target.base.replace(/\/+$/, '')}${path}`);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  let headers: Record<string, string> = payload ? { 'content-type': 'application/json' } : {};
  if (target.signIn) {
    const signer = new SignatureV4({
      service: 'execute-api',
      region: target.signIn,
      credentials: defaultProvider(),
      sha256: Sha256,
    });
    const query = Object.fromEntries(url.searchParams);
    const signed = await signer
      .sign({
        method,
        protocol: url.protocol,
        hostname: url.hostname,
        ...(url.port ? { port: Number(url.port) } : {}),
        path: url.pathname,
        query,
        headers: { ...headers, host: url.host },
        ...(payload === undefined ? {} : { body: payload }),
      })
      .catch((err: unknown) => {
        throw new OperatorError(
          `no AWS credentials to sign the request to ${url.origin} (the SDK's default chain): ${(err as Error).message}`,
        );
      });
    // fetch sets host itself, from the URL (the value signed)
    const { host: _host, ...rest } = signed.headers;
    headers = rest;
  }
  let res: Response;
  try {
    res = await fetch(url, {
      method,
      headers,
      ...(payload === undefined ? {} : { body: payload }),
      signal: AbortSignal.timeout(60_000),
    });
  } catch (err) {
    throw new OperatorError(
      `${method} ${url.href}: ${(err as Error).message}${target.signIn ? '' : ' (is `npm run dev` running? or give --url, or --stack)'}`,
    );
  }
  return { status: res.status, statusText: res.statusText, body: await res.text() };
}

/** The status line, then the body (JSON pretty-printed); exit 1 unless 2xx. */
function print(res: ApiResponse): void {
  console.log(`${res.status} ${res.statusText}`.trim());
  if (res.body) {
    let text = res.body;
    try {
      text = JSON.stringify(JSON.parse(res.body), null, 2);
    } catch {
      // not JSON: as it came
    }
    console.log(text);
  }
  if (res.status < 200 || res.status > 299) process.exitCode = 1;
}

const urlOption = () =>
  new Option(
    '--url <url>',
    'a local orders API, unsigned (default http://127.0.0.1:$PORT, npm run dev)',
  ).conflicts('stack');

export function registerOrdersCommands(program: Command): void {
  const orders = program
    .command('orders')
    .description('place and read orders through the HTTP API');
  orders
    .command('place')
    .description('POST /orders: prints the status code and the response')
    .requiredOption('--sku <sku>', 'the SKU')
    .requiredOption('--quantity <n>', 'units (a whole number)')
    .option('--order-id <id>', 'the order id (a UUID): the same id again is the same order')
    .addOption(stackOption())
    .addOption(urlOption())
    .action(
      async (opts: {
        sku: string;
        quantity: string;
        orderId?: string;
        stack?: string;
        url?: string;
      }) => {
        if (!/^-?\d+$/.test(opts.quantity.trim())) {
          program.error(`--quantity must be a whole number, got '${opts.quantity}'`);
        }
        const target = await apiTarget(opts);
        print(
          await apiRequest(target, 'POST', '/orders', {
            sku: opts.sku,
            quantity: Number(opts.quantity),
            ...(opts.orderId ? { orderId: opts.orderId } : {}),
          }),
        );
      },
    );
  orders
    .command('show <orderId>')
    .description('GET /orders/{id}: the order and its reservation status')
    .addOption(stackOption())
    .addOption(urlOption())
    .action(async (orderId: string, opts: { stack?: string; url?: string }) => {
      const target = await apiTarget(opts);
      print(await apiRequest(target, 'GET', `/orders/${encodeURIComponent(orderId)}`));
    });
}
