import { RemovalPolicy } from 'aws-cdk-lib';
import {
  HttpApi,
  HttpMethod,
  HttpStage,
  LogGroupLogDestination,
} from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import type { CfnFunction, Function as LambdaFunction } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import type { PipelineConfig } from '../config.js';

/**
 * place-order behind an HTTP API that requires IAM auth (SigV4), with access logs, the stage's
 * default route throttled (`settings`: beyond it the API answers 429 without invoking the
 * function) and place-order's reserved concurrency when one is set (0: unreserved).
 */
export class OrdersHttpApi extends Construct {
  readonly api: HttpApi;

  constructor(
    scope: Construct,
    id: string,
    props: { placeOrder: LambdaFunction; settings: PipelineConfig['httpApi'] },
  ) {
    super(scope, id);
    const { settings } = props;
    if (settings.placeOrderReservedConcurrency > 0) {
      (props.placeOrder.node.defaultChild as CfnFunction).reservedConcurrentExecutions =
        settings.placeOrderReservedConcurrency;
    }
    this.api = new HttpApi(this, 'Api', {
      defaultAuthorizer: new HttpIamAuthorizer(),
      createDefaultStage: false,
    });
    new HttpStage(this, 'Stage', {
      httpApi: this.api,
      stageName: '$default',
      autoDeploy: true,
      throttle: {
        rateLimit: settings.throttlingRateLimit,
        burstLimit: settings.throttlingBurstLimit,
      },
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
