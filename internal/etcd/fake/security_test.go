package fake

import (
	"context"
	"crypto/tls"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

func TestAuthIsEnforced(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := New()
	m := f.AddVoter("a", "https://a:2380", "https://a:2379")
	g.Expect(f.EnableAuth(ctx, "s3cret")).To(Succeed())

	anon, err := f.Dial(ctx, []string{"https://a:2379"})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = anon.MemberList(ctx)
	g.Expect(etcd.IsAuthRequired(err)).To(BeTrue(), "no identity: %v", err)
	_, err = anon.Status(ctx, "https://a:2379")
	g.Expect(err).NotTo(HaveOccurred(), "Status needs no identity")

	_, err = f.Dial(ctx, []string{"https://a:2379"}, etcd.WithPassword(etcd.RootUser, "wrong"))
	g.Expect(etcd.IsAuthFailed(err)).To(BeTrue(), "a wrong password fails the dial: %v", err)

	root, err := f.Dial(ctx, []string{"https://a:2379"}, etcd.WithPassword(etcd.RootUser, "s3cret"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = root.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	f.SetClientCertAuth(true)
	cert, err := f.Dial(ctx, []string{"https://a:2379"}, etcd.WithClientTLS(&tls.Config{Certificates: []tls.Certificate{{}}}))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cert.MemberUpdate(ctx, m.ID, []string{"https://a:2382"})
	g.Expect(err).NotTo(HaveOccurred(), "a client certificate identifies its holder")
	g.Expect(f.Members()[0].PeerURLs).To(Equal([]string{"https://a:2382"}))
	g.Expect(f.Updated()).To(HaveLen(1))
	g.Expect(root.CheckPassword(ctx, etcd.RootUser, "wrong")).To(Satisfy(etcd.IsAuthFailed))
	g.Expect(root.CheckPassword(ctx, etcd.RootUser, "s3cret")).To(Succeed())
	g.Expect(f.Calls[len(f.Calls)-1].Op).To(Equal(etcd.OpCheckPassword))
	for _, c := range f.Calls {
		if c.Op == etcd.OpDial && c.Security.Username != "" {
			g.Expect(c.Security.Username).To(Equal(etcd.RootUser), "the dial's security is recorded")
		}
	}
}

func TestMemberUpdateRefusesATakenURL(t *testing.T) {
	g := NewWithT(t)
	f := New()
	a := f.AddVoter("a", "http://a:2380", "http://a:2379")
	f.AddVoter("b", "http://b:2380", "http://b:2379")
	_, err := f.MemberUpdate(context.Background(), a.ID, []string{"http://b:2380"})
	g.Expect(etcd.IsPeerURLExists(err)).To(BeTrue())
	_, err = f.MemberUpdate(context.Background(), 12345, []string{"http://c:2380"})
	g.Expect(etcd.IsMemberNotFound(err)).To(BeTrue())
}
