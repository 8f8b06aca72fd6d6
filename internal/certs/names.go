package certs

import (
	"fmt"
	"net"
	"strings"
)

// ServiceNames are a Service's DNS names in every form a client may use:
// name, name.ns, name.ns.svc and name.ns.svc.<domain>.
func ServiceNames(service, namespace, clusterDomain string) []string {
	domain := strings.TrimSuffix(clusterDomain, ".")
	return []string{
		service,
		service + "." + namespace,
		service + "." + namespace + ".svc",
		service + "." + namespace + ".svc." + domain,
	}
}

// MemberNames are the names a member's certificate carries: its own DNS name
// behind the peer Service (with and without the domain), the peer and
// client Services in all forms, and localhost, which etcd's own tools and a
// probe inside the Pod use.
func MemberNames(member, peerService, clientService, namespace, clusterDomain string) ([]string, []net.IP) {
	domain := strings.TrimSuffix(clusterDomain, ".")
	dns := []string{
		fmt.Sprintf("%s.%s.%s.svc.%s", member, peerService, namespace, domain),
		fmt.Sprintf("%s.%s.%s.svc", member, peerService, namespace),
	}
	dns = append(dns, ServiceNames(peerService, namespace, domain)...)
	dns = append(dns, ServiceNames(clientService, namespace, domain)...)
	dns = append(dns, "localhost")
	return dns, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
}
