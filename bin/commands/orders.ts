import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { Sha256 } from '@smithy/core/checksum';
import { SignatureV4 } from '@smithy/signature-v4';
import { type Command, Option } from 'commander';
import { STACK_OUTPUTS } from '../../infra/stackOutputs.js';
import { env } from './common.js';
import { describeStack, OperatorError, outputOf, stackOption } from './stack.js';

export interface ApiResponse {
  status: number;
  statusText: string;
  body: string;
}

/**
 * One request to the orders API: a deployed stack's (`--stack`) or a local one (`--url`, else
 * `npm run dev`'s, unsigned). To a deployed stack it is signed with SigV4 for `execute-api`
 * (IAM authorization) in the stack's region, with the credentials of the SDK's default chain, by
 * the SDK's own signer: the signed headers are host, content-type, x-amz-date, the content hash
 * and, for temporary credentials, x-amz-security-token.
 */
export async function apiRequest(
  opts: { stack?: string; url?: string },
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<ApiResponse> {
  const stack = opts.stack ? await describeStack(opts.stack) : undefined;
  const base = stack ? outputOf(stack, STACK_OUTPUTS.apiUrl) : opts.url;
  const url = new URL(`${(base ?? `http://127.0.0.1:${env.PORT}`).replace(/\/+$/, '')}${path}`);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  let headers: Record<string, string> = payload ? { 'content-type': 'application/json' } : {};
  if (stack) {
    const signer = new SignatureV4({
      service: 'execute-api',
      region: stack.region,
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
      `${method} ${url.href}: ${(err as Error).message}${stack ? '' : ' (is `npm run dev` running? or give --url, or --stack)'}`,
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
        print(
          await apiRequest(opts, 'POST', '/orders', {
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
      print(await apiRequest(opts, 'GET', `/orders/${encodeURIComponent(orderId)}`));
    });
}
