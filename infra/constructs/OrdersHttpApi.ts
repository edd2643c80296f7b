import { RemovalPolicy } from 'aws-cdk-lib';
import {
  HttpApi,
  HttpMethod,
  HttpStage,
  LogGroupLogDestination,
} from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';

/** place-order behind an HTTP API that requires IAM auth (SigV4), with access logs. */
export class OrdersHttpApi extends Construct {
  readonly api: HttpApi;

  constructor(scope: Construct, id: string, props: { placeOrder: IFunction }) {
    super(scope, id);
    this.api = new HttpApi(this, 'Api', {
      defaultAuthorizer: new HttpIamAuthorizer(),
      createDefaultStage: false,
    });
    new HttpStage(this, 'Stage', {
      httpApi: this.api,
      stageName: '$default',
      autoDeploy: true,
      accessLogSettings: {
        destination: new LogGroupLogDestination(
          new LogGroup(this, 'AccessLogs', {
            retention: RetentionDays.ONE_MONTH,
            removalPolicy: RemovalPolicy.DESTROY,
          }),
        ),
      },
    });
    const integration = new HttpLambdaIntegration('PlaceOrder', props.placeOrder);
    this.api.addRoutes({ path: '/orders', methods: [HttpMethod.POST], integration });
    this.api.addRoutes({ path: '/orders/{id}', methods: [HttpMethod.GET], integration });
    this.api.addRoutes({ path: '/orders/{id}/cancel', methods: [HttpMethod.POST], integration });
  }
}
