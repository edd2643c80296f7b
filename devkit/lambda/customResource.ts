import { randomUUID } from 'node:crypto';
import type { DeployedAssembly, DeployedFunction } from './assembly.js';
import type { CfnResource, StackScope } from './intrinsics.js';
import type { LocalDeployment } from './LocalDeployment.js';
import { LOCAL_ACCOUNT } from './localReferences.js';

export type CustomResourceResult =
  | {
      status: 'SUCCESS';
      physicalResourceId: string;
      data: Record<string, unknown>;
      request: Record<string, unknown>;
    }
  | { status: 'FAILED'; reason: string; request: Record<string, unknown> };

export type CustomResourceRequestType = 'Create' | 'Update' | 'Delete';

/** The CloudFormation request a custom resource's function gets. */
type CustomResourceRequest = {
  RequestType: CustomResourceRequestType;
  ServiceToken: string;
  ResponseURL: string;
  StackId: string;
  RequestId: string;
  LogicalResourceId: string;
  ResourceType: string;
  ResourceProperties: Record<string, unknown>;
  PhysicalResourceId?: string;
  OldResourceProperties?: Record<string, unknown>;
};

/**
 * Runs a custom resource's `onEvent` function the way the CDK Provider framework does: the
 * CloudFormation request (built from the template's resource, its properties resolved) is the
 * payload of a synchronous invocation; a function error fails the resource with its message; the
 * response's `PhysicalResourceId` defaults to the request id on Create and may not change on
 * Delete (aws-cdk-lib `custom-resources` provider framework, `framework.ts`).
 */
export async function runCustomResource(
  host: LocalDeployment,
  logicalId: string,
  requestType: CustomResourceRequestType,
  previous: { physicalResourceId?: string; oldProperties?: Record<string, unknown> } = {},
): Promise<CustomResourceResult> {
  const { stack, resource } = customResourceOf(host.assembly, logicalId);
  const user = onEventFunctionOf(host.assembly, stack, logicalId, resource);
  const requestId = randomUUID();
  const props = resource.Properties ?? {};
  const request: CustomResourceRequest = {
    RequestType: requestType,
    ServiceToken: String(host.resolve(stack, props.ServiceToken, `${logicalId}.ServiceToken`)),
    ResponseURL: `https://cloudformation-custom-resource-response-local.s3.amazonaws.com/${requestId}`,
    StackId: `arn:aws:cloudformation:${host.region}:${LOCAL_ACCOUNT}:stack/${stack.stackName}/${randomUUID()}`,
    RequestId: requestId,
    LogicalResourceId: logicalId,
    ResourceType: resource.Type,
    ResourceProperties: host.resolve(stack, props, `${logicalId}.Properties`) as Record<
      string,
      unknown
    >,
    ...(requestType === 'Create'
      ? {}
      : {
          PhysicalResourceId: previous.physicalResourceId ?? requestId,
          OldResourceProperties: previous.oldProperties ?? {},
        }),
  };
  const outcome = await host.fn(user.id).invoke(request);
  if (!outcome.ok) {
    const reason = `${outcome.error.errorMessage}\n\nLogs: /aws/lambda/${user.id}\n`;
    return { status: 'FAILED', reason, request };
  }
  return resultOf(outcome.payload, request);
}

function customResourceOf(
  assembly: DeployedAssembly,
  logicalId: string,
): { stack: StackScope; resource: CfnResource } {
  const found = assembly.stacks
    .map((stack) => ({ stack, resource: stack.template.Resources?.[logicalId] }))
    .find((x) => x.resource !== undefined);
  if (!found) throw new Error(`no custom resource ${logicalId}`);
  return found as { stack: StackScope; resource: CfnResource };
}

/** The user's `onEvent` function, behind the Provider framework function of the ServiceToken. */
function onEventFunctionOf(
  assembly: DeployedAssembly,
  stack: StackScope,
  logicalId: string,
  resource: CfnResource,
): DeployedFunction {
  const provider = assembly.functionNamedBy(stack, resource.Properties?.ServiceToken);
  const userArn = provider?.environment.USER_ON_EVENT_FUNCTION_ARN;
  const user = provider ? assembly.functionNamedBy(stack, userArn) : undefined;
  if (!user) {
    throw new Error(`${logicalId}: no Provider framework onEvent function behind its ServiceToken`);
  }
  return user;
}

/** The resource's outcome from the function's response, as the Provider framework reads it. */
function resultOf(payload: unknown, request: CustomResourceRequest): CustomResourceResult {
  const result = (payload ?? {}) as {
    PhysicalResourceId?: string;
    Data?: Record<string, unknown>;
  };
  const physicalResourceId =
    result.PhysicalResourceId ??
    (request.RequestType === 'Create' ? request.RequestId : (request.PhysicalResourceId as string));
  if (request.RequestType === 'Delete' && physicalResourceId !== request.PhysicalResourceId) {
    return {
      status: 'FAILED',
      reason: `DELETE: cannot change the physical resource ID from "${request.PhysicalResourceId}" to "${physicalResourceId}" during deletion`,
      request,
    };
  }
  return { status: 'SUCCESS', physicalResourceId, data: result.Data ?? {}, request };
}
