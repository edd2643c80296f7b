export { TcpProxy } from '../../shared/local/tcpProxy.js';
