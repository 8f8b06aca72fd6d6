//go:build integration

package tlsproc_test

import (
	"context"
	"net"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/certs/certstest"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
	"github.com/quorumctl/etcd-operator/test/tlsproc"
)

// TestDialByNameThroughAddresses: a member whose client certificate lists
// only a DNS name, as a user's own certificate usually does, cannot be
// verified when dialled by its address (clientv3 checks the certificate
// against the endpoint's host, whatever tls.Config.ServerName says); named
// by that DNS name and connected to its address with WithAddresses, it
// serves a write, a linearizable read, Status and MemberList. The name is
// under .invalid, which never resolves: only the map can have connected it.
func TestDialByNameThroughAddresses(t *testing.T) {
	g := NewWithT(t)
	const name = "m0.dns-only.invalid"
	peerCA, clientCA := certstest.CA(t, "peer-ca"), certstest.CA(t, "client-ca")
	operator := certstest.ClientCert(t, clientCA, "root")
	asOperator := certstest.ClientConfig([]*certs.KeyPair{clientCA}, &operator)
	dir := t.TempDir()
	m := etcdproc.StartCluster(t, etcdproc.Binary(t, ""), etcdproc.Options{
		Members: 1, ClientScheme: "https", PeerScheme: "https",
		// The harness's readiness check dials 127.0.0.1 with plain clientv3.
		ClientTLS: tlsproc.VerifyingName(asOperator, name),
		MemberArgs: func(m *etcdproc.Member) []string {
			f := tlsproc.NewFiles(t, filepath.Join(dir, m.Name))
			f.Issue(t, "peer", peerCA, time.Hour)
			f.IssueFor(t, "client", clientCA, time.Hour, []string{name}, nil)
			f.Trust(t, "peer", peerCA)
			f.Trust(t, "client", clientCA)
			return f.Flags(t, true)
		},
	})[0]
	addr, err := url.Parse(m.ClientURL)
	g.Expect(err).NotTo(HaveOccurred())
	named := "https://" + net.JoinHostPort(name, addr.Port())
	// Every call has its own timeout besides the test's: a failure must be
	// an error, never a hung test.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dialer := etcd.NewDialer(etcd.WithCallTimeout(5*time.Second), etcd.WithDialTimeout(5*time.Second))

	direct, err := dialer.Dial(ctx, []string{m.ClientURL}, etcd.WithClientTLS(asOperator))
	g.Expect(err).NotTo(HaveOccurred())
	defer direct.Close()
	_, err = direct.Status(ctx, m.ClientURL)
	g.Expect(err).To(MatchError(And(ContainSubstring("x509"), ContainSubstring("doesn't contain any IP SANs"))),
		"by its address the certificate does not verify")

	cli, err := dialer.Dial(ctx, []string{named}, etcd.WithClientTLS(asOperator),
		etcd.WithAddresses(map[string]string{net.JoinHostPort(name, addr.Port()): addr.Host}))
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	before, err := cli.Status(ctx, named)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(before.Endpoint).To(Equal(named))
	g.Expect(cli.AdvanceLog(ctx, 3)).To(Succeed(), "a write")
	g.Expect(cli.Health(ctx, named)).To(Succeed(), "a linearizable read")
	after, err := cli.Status(ctx, named)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.MemberID).To(Equal(before.MemberID))
	g.Expect(after.RaftIndex).To(BeNumerically(">=", before.RaftIndex+3), "the write went through raft")
	list, err := cli.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Members).To(HaveLen(1))
	g.Expect(list.Members[0].ID).To(Equal(before.MemberID))
}
