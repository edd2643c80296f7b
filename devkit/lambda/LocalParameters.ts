import { DeleteParametersCommand, PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import type { DeployedAssembly } from './assembly.js';
import type { Resolve } from './localReferences.js';

/**
 * The templates' SSM parameters (String) in a local SSM (moto_server), each named under `prefix`:
 * never the template's own name, as the server may be shared (tests, a cdk deploy against moto),
 * so each deployment's parameters are its own; `Ref` resolves to the local name.
 */
export class LocalParameters {
  private readonly names = new Map<string, string>();

  constructor(
    private readonly assembly: DeployedAssembly,
    private readonly region: string,
    private readonly endpoint: string,
    private readonly prefix: string,
  ) {}

  /** Creates every parameter of the templates with its value. */
  async create(resolve: Resolve): Promise<void> {
    const all = this.assembly.resources('AWS::SSM::Parameter');
    if (!all.length) return;
    await this.withClient(async (ssm) => {
      for (const { stack, logicalId, resource } of all) {
        const name = `/${this.prefix}/${stack.stackName}/${logicalId}`;
        const value = resolve(stack, resource.Properties?.Value, `${logicalId}.Value`);
        await ssm.send(put(name, String(value)));
        this.names.set(`${stack.stackName}/${logicalId}`, name);
      }
    });
  }

  /** The local name of a template's parameter, once created. */
  nameOf(stackName: string, logicalId: string): string | undefined {
    return this.names.get(`${stackName}/${logicalId}`);
  }

  /** Stores a new value in a parameter (by its logical id, or the start of it), as an operator would. */
  async set(logicalId: string, value: string): Promise<void> {
    const found = this.assembly
      .resources('AWS::SSM::Parameter')
      .find((r) => r.logicalId === logicalId || r.logicalId.startsWith(logicalId));
    const name = found && this.nameOf(found.stack.stackName, found.logicalId);
    if (!name) throw new Error(`no parameter ${logicalId}`);
    await this.withClient((ssm) => ssm.send(put(name, value)));
  }

  /** Deletes the parameters it created. */
  async delete(): Promise<void> {
    if (!this.names.size) return;
    await this.withClient((ssm) =>
      ssm.send(new DeleteParametersCommand({ Names: [...this.names.values()] })).catch(() => {}),
    );
  }

  private async withClient<T>(use: (ssm: SSMClient) => Promise<T>): Promise<T> {
    const ssm = new SSMClient({
      region: this.region,
      endpoint: this.endpoint,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    try {
      return await use(ssm);
    } finally {
      ssm.destroy();
    }
  }
}

function put(name: string, value: string): PutParameterCommand {
  return new PutParameterCommand({ Name: name, Value: value, Type: 'String', Overwrite: true });
}
