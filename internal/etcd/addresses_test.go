package etcd_test

import (
	"errors"
	"net/url"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// TestAddressesConnectNamedEndpoints: a member named by a host that does not
// resolve (.invalid never does) is reached at the address the dial maps it
// to, for balanced and single-endpoint calls alike; an endpoint the map does
// not list fails as an UnmappedEndpointError, at once, and nothing dials
// its host. (TLS, where the name matters for the certificate, is proved
// against real etcd processes in test/tlsproc.)
func TestAddressesConnectNamedEndpoints(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := testCtx(t)
	m := startCluster(t, memberOpts{})
	served := mustURL(t, m.clientURL)
	named := url.URL{Scheme: "http", Host: "m1.member.invalid:" + served.Port()}
	other := url.URL{Scheme: "http", Host: "m2.member.invalid:" + served.Port()}
	addrs := etcd.WithAddresses(map[string]string{named.Host: served.Host})

	c, err := etcd.NewDialer().Dial(ctx, []string{named.String()}, addrs)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Close() })

	list, err := c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Members).To(HaveLen(1))
	st, err := c.Status(ctx, named.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Endpoint).To(Equal(named.String()), "the status names the endpoint as dialled")
	g.Expect(st.MemberID).To(Equal(m.id()))
	g.Expect(c.Health(ctx, named.String())).To(Succeed())

	_, err = c.Status(ctx, other.String())
	expectCallError(g, err, etcd.OpStatus, other.String())
	unmapped, ok := errors.AsType[*etcd.UnmappedEndpointError](err)
	g.Expect(ok).To(BeTrue(), "want *UnmappedEndpointError, got %T: %v", err, err)
	g.Expect(unmapped.Endpoint).To(Equal(other.String()))
	g.Expect(etcd.IsUnavailable(err)).To(BeFalse(), "a caller's mistake, not a member that is down")

	_, err = etcd.NewDialer().Dial(ctx, []string{named.String(), other.String()}, addrs)
	expectCallError(g, err, etcd.OpDial, "")
	_, ok = errors.AsType[*etcd.UnmappedEndpointError](err)
	g.Expect(ok).To(BeTrue(), "want *UnmappedEndpointError, got %T: %v", err, err)
}

// WithAddresses keeps its own copy: the caller's map changing afterwards
// does not redirect a dial.
func TestWithAddressesCopiesTheMap(t *testing.T) {
	g := NewWithT(t)
	addrs := map[string]string{"a:1": "127.0.0.1:1"}
	s := etcd.ResolveDial(etcd.DialSettings{}, etcd.WithAddresses(addrs))
	addrs["a:1"] = "127.0.0.1:2"
	g.Expect(s.Addresses).To(Equal(map[string]string{"a:1": "127.0.0.1:1"}))
	g.Expect(s.CheckEndpoints("https://a:1")).To(Succeed())
	g.Expect(s.CheckEndpoints("https://a:2")).To(MatchError(ContainSubstring("https://a:2 is not among")))
	g.Expect(etcd.DialSettings{}.CheckEndpoints("https://anything:1")).To(Succeed(), "without addresses every endpoint is dialled as named")
}
