import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { startHttpApi } from '../emulators/httpApi.js';
import type { DeployedAssembly, DeployedFunction } from './assembly.js';
import type { InvokeOutcome } from './LambdaFunction.js';
import { LOCAL_ACCOUNT, type Resolve } from './localReferences.js';

/** An `AWS::ApiGatewayV2::Route` of the template and the function behind its integration. */
interface Route {
  routeKey: string;
  method: string;
  path: string;
  iam: boolean;
  fn: DeployedFunction;
}

/**
 * The HTTP API in front of a function, as its template routes it: each `AWS::ApiGatewayV2::Route`
 * (`POST /orders`, `GET /orders/{id}`) with its route key and path parameters in the payload 2.0
 * event, unmatched requests answered 404 by the API itself, a function error answered 500
 * (`{"message":"Internal Server Error"}`). IAM authorization is not checked locally: the event
 * carries a local caller in `requestContext.authorizer.iam`.
 */
export async function startLocalHttpApi(
  assembly: DeployedAssembly,
  resolve: Resolve,
  invoke: (functionId: string, event: APIGatewayProxyEventV2) => Promise<InvokeOutcome>,
  port: number,
): Promise<{ url: string; close(): Promise<void> }> {
  const routes = routesOf(assembly, resolve);
  return startHttpApi(
    async (event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> => {
      const method = event.requestContext.http.method;
      const match = routes
        .map((r) => ({ r, params: matchPath(r.path, event.rawPath) }))
        .find((x) => x.r.method === method && x.params);
      if (!match?.params) return jsonAnswer(404, '{"message":"Not Found"}');
      const outcome = await invoke(match.r.fn.id, routedEvent(event, match.r, match.params));
      if (!outcome.ok) return jsonAnswer(500, '{"message":"Internal Server Error"}');
      return outcome.payload as APIGatewayProxyStructuredResultV2;
    },
    { port },
  );
}

/** The IAM caller of every local request on an `AWS_IAM` route. */
const LOCAL_CALLER = {
  accessKey: 'LOCAL',
  accountId: LOCAL_ACCOUNT,
  callerId: 'LOCAL',
  cognitoIdentity: null,
  principalOrgId: null,
  userArn: `arn:aws:iam::${LOCAL_ACCOUNT}:user/local`,
  userId: 'LOCAL',
};

function routesOf(assembly: DeployedAssembly, resolve: Resolve): Route[] {
  return assembly.resources('AWS::ApiGatewayV2::Route').map(({ stack, resource }) => {
    const p = resource.Properties ?? {};
    const target = String(resolve(stack, p.Target, 'Route.Target')).replace(/^integrations\//, '');
    const found = stack.template.Resources?.[target];
    const integration = found?.Type === 'AWS::ApiGatewayV2::Integration' ? found : undefined;
    const fn = assembly.functionNamedBy(stack, integration?.Properties?.IntegrationUri);
    if (!fn) throw new Error(`route ${String(p.RouteKey)}: no function behind its integration`);
    const [method, path] = String(p.RouteKey).split(' ') as [string, string];
    return {
      routeKey: String(p.RouteKey),
      method,
      path,
      iam: p.AuthorizationType === 'AWS_IAM',
      fn,
    };
  });
}

/** The event as the API passes it on a route: its route key, path parameters and caller. */
function routedEvent(
  event: APIGatewayProxyEventV2,
  route: Route,
  params: Record<string, string>,
): APIGatewayProxyEventV2 {
  return {
    ...event,
    routeKey: route.routeKey,
    ...(Object.keys(params).length ? { pathParameters: params } : {}),
    requestContext: {
      ...event.requestContext,
      routeKey: route.routeKey,
      ...(route.iam ? { authorizer: { iam: LOCAL_CALLER } } : {}),
    } as APIGatewayProxyEventV2['requestContext'],
  };
}

function jsonAnswer(statusCode: number, body: string): APIGatewayProxyStructuredResultV2 {
  return { statusCode, headers: { 'content-type': 'application/json' }, body };
}

/** `/orders/{id}/cancel` against `/orders/42/cancel` → `{ id: '42' }`; undefined when it does not match. */
export function matchPath(template: string, path: string): Record<string, string> | undefined {
  const t = template.split('/');
  const p = path.split('/');
  if (t.length !== p.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < t.length; i++) {
    const seg = t[i] as string;
    const m = /^\{(\w+)\}$/.exec(seg);
    if (m) params[m[1] as string] = decodeURIComponent(p[i] as string);
    else if (seg !== p[i]) return undefined;
  }
  return params;
}
