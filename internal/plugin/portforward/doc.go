// Package portforward opens local tunnels to a Pod's port through the API
// server's pods/portforward subresource, using client-go's port-forwarding
// (WebSocket, falling back to SPDY, as kubectl does), so the plugin needs no
// network path into the cluster.
//
// client-go reports a refused upgrade only as text, so before forwarding the
// package asks the API server whether the caller may, with a
// SelfSubjectAccessReview and a Get of the Pod: a missing permission or a
// vanished Pod then comes back as an API error that apierrors classifies.
package portforward
