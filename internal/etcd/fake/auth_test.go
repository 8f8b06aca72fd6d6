package fake_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// The fake's authentication behaves as etcd's does for the operator: a
// wrong password fails the dial, no identity fails the calls, Status needs
// an identity but not the root role, and enabling is idempotent.
func TestFakeAuth(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f, m1, c := newCluster(t)

	on, err := c.AuthEnabled(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(on).To(BeFalse())
	g.Expect(c.EnableAuth(ctx, etcd.AuthSetup{})).To(HaveOccurred(), "no root password")
	g.Expect(c.EnableAuth(ctx, etcd.AuthSetup{RootPassword: "pw", CertificateUsers: []string{"op"}})).To(Succeed())
	g.Expect(f.AuthUsers()).To(Equal(map[string]bool{"root": true, "op": true}))

	// The client that enabled it has no identity now.
	_, err = c.MemberList(ctx)
	g.Expect(etcd.IsAuthRequired(err)).To(BeTrue(), "%v", err)
	_, err = c.Status(ctx, client1)
	g.Expect(etcd.IsAuthRequired(err)).To(BeTrue(), "%v", err)

	_, err = f.Dial(ctx, []string{client1}, etcd.WithPassword("root", "nope"))
	g.Expect(etcd.IsAuthFailed(err)).To(BeTrue(), "%v", err)
	g.Expect(fmt.Sprintf("%v %+v %#v", err, etcd.Credentials{User: "root", Password: "nope"}, etcd.Credentials{User: "root", Password: "nope"})).NotTo(ContainSubstring("nope"))

	root, err := f.Dial(ctx, []string{client1}, etcd.WithPassword("root", "pw"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = root.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	st, err := root.Status(ctx, client1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.MemberID).To(Equal(m1.ID))
	g.Expect(root.EnableAuth(ctx, etcd.AuthSetup{RootPassword: "pw"})).To(Succeed(), "again, once on")
	g.Expect(f.EnabledAuth).To(HaveLen(2))
}
