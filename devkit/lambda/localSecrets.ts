import { randomBytes } from 'node:crypto';
import {
  CreateSecretCommand,
  DeleteSecretCommand,
  GetSecretValueCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import type { DeployedAssembly, TemplateResource } from './assembly.js';
import type { Resolve } from './localReferences.js';

/** A secret of the template, with the value the runner would store for it. */
export interface TemplateSecret {
  stackName: string;
  logicalId: string;
  /** The construct path (`ReliableMessagingData/OrdersDbSecret`). */
  path: string;
  /** The template's `SecretStringTemplate` fields plus a generated `GenerateStringKey`. */
  generated: Record<string, string>;
}

/** The value stored for a template secret (default: `generated`). */
export type SecretValueOf = (secret: TemplateSecret) => Record<string, string>;

interface GenerateSecretString {
  SecretStringTemplate?: unknown;
  GenerateStringKey?: string;
  PasswordLength?: number;
}

/**
 * The templates' secrets in a local Secrets Manager (moto_server), each named under `prefix` so
 * that deployments sharing the server never share a secret.
 */
export class LocalSecrets {
  private readonly client: SecretsManagerClient;
  private readonly arns = new Map<string, string>();

  constructor(
    region: string,
    endpoint: string,
    private readonly prefix: string,
  ) {
    this.client = new SecretsManagerClient({
      region,
      endpoint,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
  }

  /** Creates every secret of the templates, then stores its value. */
  async create(assembly: DeployedAssembly, resolve: Resolve, storedValue?: SecretValueOf) {
    const secrets = assembly.resources('AWS::SecretsManager::Secret');
    for (const { stack, logicalId } of secrets) {
      const out = await this.client.send(
        new CreateSecretCommand({
          Name: `${this.prefix}/${stack.stackName}/${logicalId}`,
          SecretString: '{}',
        }),
      );
      this.arns.set(`${stack.stackName}/${logicalId}`, out.ARN as string);
    }
    // the values may reference other secrets (an app secret's `masterarn`): all ARNs exist now
    for (const secret of secrets) await this.storeValue(secret, resolve, storedValue);
  }

  /** The ARN standing in for a template secret (`Ref` of it), once created. */
  arnOf(stackName: string, logicalId: string): string | undefined {
    return this.arns.get(`${stackName}/${logicalId}`);
  }

  /** The stored value of a secret (as the functions read it from Secrets Manager). */
  async value(arn: string): Promise<Record<string, unknown>> {
    const out = await this.client.send(new GetSecretValueCommand({ SecretId: arn }));
    return JSON.parse(out.SecretString ?? '{}') as Record<string, unknown>;
  }

  /** Deletes the secrets it created (a shared server outlives the deployment), then its client. */
  async delete(): Promise<void> {
    for (const arn of this.arns.values()) {
      await this.client
        .send(new DeleteSecretCommand({ SecretId: arn, ForceDeleteWithoutRecovery: true }))
        .catch(() => {});
    }
    this.client.destroy();
  }

  private async storeValue(
    { stack, logicalId, resource }: TemplateResource,
    resolve: Resolve,
    storedValue?: SecretValueOf,
  ): Promise<void> {
    const generated = generatedValue(resource.Properties ?? {}, (v) => resolve(stack, v));
    const path = String(resource.Metadata?.['aws:cdk:path'] ?? logicalId).replace(
      /\/Resource$/,
      '',
    );
    const value =
      storedValue?.({ stackName: stack.stackName, logicalId, path, generated }) ?? generated;
    await this.client.send(
      new PutSecretValueCommand({
        SecretId: this.arnOf(stack.stackName, logicalId),
        SecretString: JSON.stringify(value),
      }),
    );
  }
}

/**
 * The value the template gives a secret: its `SecretString`, or its `SecretStringTemplate` with a
 * random `GenerateStringKey` added, as Secrets Manager generates it (letters and digits).
 */
function generatedValue(
  p: Record<string, unknown>,
  resolve: (value: unknown) => unknown,
): Record<string, string> {
  const parse = (value: unknown) => JSON.parse(String(resolve(value))) as Record<string, string>;
  if (typeof p.SecretString === 'string') return parse(p.SecretString);
  const gen = p.GenerateSecretString as GenerateSecretString | undefined;
  if (!gen) return {};
  const template = gen.SecretStringTemplate ? parse(gen.SecretStringTemplate) : {};
  if (!gen.GenerateStringKey) return { ...template };
  const password = randomBytes(48)
    .toString('base64')
    .replace(/[^A-Za-z0-9]/g, '')
    .slice(0, gen.PasswordLength ?? 32);
  return { ...template, [gen.GenerateStringKey]: password };
}
