// Package portforward tunnels local TCP connections to a Pod's port through
// the API server's pods/portforward subresource, so the plugin needs no
// network path into the cluster.
//
// client-go's own portforward package would need k8s.io/streaming and
// github.com/moby/spdystream, which the module does not require, so this
// package speaks the Kubernetes port-forward WebSocket protocol
// (v4.channel.k8s.io) directly over gorilla/websocket, which it does:
//
//   - the request is GET .../pods/NAME/portforward?ports=PORT with the
//     WebSocket upgrade; the API server authorizes it as "create" on
//     pods/portforward and hands it to the kubelet;
//   - every message carries a channel byte first: channel 0 is the data
//     stream, channel 1 the error stream of the (single) port;
//   - the first two bytes on each channel are the port number, little endian;
//   - anything else on the error channel is the kubelet's reason for failing,
//     typically that nothing listens on the port.
//
// One WebSocket carries exactly one TCP connection, so a Tunnel opens a new
// WebSocket for every local connection it accepts, as kubectl port-forward
// opens a new stream pair.
package portforward
