package tlsproc

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
)

// renderedPrefixes are the flags RenderedFlags takes from the operator's
// rendering: the member's addresses and its TLS. Name, data dir, token and
// initial cluster stay the harness's.
var renderedPrefixes = []string{
	"--listen-client-urls=", "--advertise-client-urls=", "--listen-peer-urls=", "--initial-advertise-peer-urls=",
}

// MemberSpec is an EtcdMember with the recorded URLs and TLS shape given,
// as the operator would hold it for a member reached on loopback.
func MemberSpec(name, peerURL, clientURL string, tls *v1alpha1.MemberTLS) *v1alpha1.EtcdMember {
	return &v1alpha1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec:       v1alpha1.EtcdMemberSpec{ClusterName: "c", PeerURL: peerURL, ClientURL: clientURL, TLS: tls},
	}
}

// RenderedFlags are the address and TLS flags internal/component/pod
// renders for m, moved onto loopback: the Pod's 0.0.0.0 listeners become
// 127.0.0.1, the fixed client port becomes the port of m's client URL, and
// the TLS mounts become f's directory. The flags under test are the
// product's own; only where they point changes.
func (f Files) RenderedFlags(t testing.TB, m *v1alpha1.EtcdMember) []string {
	t.Helper()
	cu, err := url.Parse(m.Spec.ClientURL)
	if err != nil || cu.Port() == "" {
		t.Fatalf("member %s has no client port in %q", m.Name, m.Spec.ClientURL)
	}
	moves := strings.NewReplacer(
		fmt.Sprintf("0.0.0.0:%d", v1alpha1.ClientPort), "127.0.0.1:"+cu.Port(),
		"0.0.0.0:", "127.0.0.1:",
		podTLSDir, f.Dir,
	)
	var out []string
	for _, a := range pod.Args(pod.Params{Member: m, ClusterDomain: "cluster.local"}) {
		keep := strings.Contains(a, podTLSDir+"/") || strings.Contains(a, "cert-auth")
		for _, p := range renderedPrefixes {
			keep = keep || strings.HasPrefix(a, p)
		}
		if keep {
			out = append(out, moves.Replace(a))
		}
	}
	return out
}

// ReplaceFlags is args with every flag that one of with also sets taken
// out, and with appended.
func ReplaceFlags(args, with []string) []string {
	names := map[string]bool{}
	for _, w := range with {
		names[strings.SplitN(w, "=", 2)[0]] = true
	}
	var out []string
	for _, a := range args {
		if !names[strings.SplitN(a, "=", 2)[0]] {
			out = append(out, a)
		}
	}
	return append(out, with...)
}
