//go:build integration

package tlsproc_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/certs/certstest"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
	"github.com/quorumctl/etcd-operator/test/tlsproc"
)

const rootPassword = "s3cret-root"

func authCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func authDial(t *testing.T, eps []string, opts ...etcd.DialOption) (etcd.Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := etcd.NewDialer(etcd.WithCallTimeout(5*time.Second)).Dial(ctx, eps, opts...)
	if c != nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

// TestAuthPassword, on every pinned etcd: the operator's calls turn
// authentication on a running plain cluster, again after partial progress
// and again once it is on; root's right password works for every call the
// operator makes, a wrong one is refused at the dial as AuthFailed and no
// identity as AuthRequired; a learner's Status is read with the token from
// another member, since a learner refuses to give one; a client whose token
// a restarted member never saw (simple tokens live in each member's memory)
// still gets its answer.
func TestAuthPassword(t *testing.T) {
	for _, v := range etcdproc.Versions(t) {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			members := etcdproc.StartCluster(t, etcdproc.Binary(t, strings.TrimPrefix(v, "v")), etcdproc.Options{Members: 3})
			ctx := authCtx(t)
			eps := etcdproc.ClientURLs(members)

			// Partial progress of an earlier pass: the role exists and root
			// has another password.
			raw, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = raw.Close() }()
			_, err = raw.RoleAdd(ctx, etcd.RootRole)
			g.Expect(err).NotTo(HaveOccurred())
			_, err = raw.UserAdd(ctx, etcd.RootUser, "an-older-one")
			g.Expect(err).NotTo(HaveOccurred())

			// Credentials before auth is on are ignored.
			op, err := authDial(t, eps, etcd.WithPassword(etcd.RootUser, rootPassword))
			g.Expect(err).NotTo(HaveOccurred())
			on, err := op.AuthEnabled(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(on).To(BeFalse())
			g.Expect(op.EnableAuth(ctx, etcd.AuthSetup{RootPassword: rootPassword})).To(Succeed())
			// The same client, which had no token, goes on working.
			_, err = op.MemberList(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(op.EnableAuth(ctx, etcd.AuthSetup{RootPassword: rootPassword})).To(Succeed(), "enabling again")

			on, err = op.AuthEnabled(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(on).To(BeTrue())

			_, err = authDial(t, eps, etcd.WithPassword(etcd.RootUser, "an-older-one"))
			g.Expect(etcd.IsAuthFailed(err)).To(BeTrue(), "the older password: %v", err)
			_, err = authDial(t, eps, etcd.WithPassword(etcd.RootUser, "wrong"))
			g.Expect(etcd.IsAuthFailed(err)).To(BeTrue(), "a wrong password: %v", err)
			g.Expect(err.Error()).NotTo(ContainSubstring("wrong"), "the error does not repeat the password")

			anon, err := authDial(t, eps)
			g.Expect(err).NotTo(HaveOccurred())
			// A linearizable member list asks for an identity (any: see
			// TestAuthCertificate), as maintenance does; AuthStatus does
			// on 3.5 and 3.6, not on 3.7, so the operator asks it with
			// its identity.
			_, err = anon.MemberList(ctx)
			g.Expect(etcd.IsAuthRequired(err)).To(BeTrue(), "no identity: %v", err)
			_, err = anon.AuthEnabled(ctx)
			if !strings.HasPrefix(v, "v3.7") {
				g.Expect(etcd.IsAuthRequired(err)).To(BeTrue(), "no identity: %v", err)
			}
			err = anon.Defragment(ctx, eps[0])
			g.Expect(etcd.IsAuthRequired(err)).To(BeTrue(), "no identity: %v", err)
			_, err = anon.Status(ctx, eps[0])
			t.Logf("%s: Status without identity: %v", v, err)

			// The member Pods' readiness probe asks for no identity.
			for _, m := range members {
				resp, err := http.Get(m.MetricsURL + pod.HealthPath)
				g.Expect(err).NotTo(HaveOccurred())
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "%s: %s", m.Name, body)
				g.Expect(string(body)).To(ContainSubstring(`"health":"true"`))
			}

			root, err := authDial(t, eps, etcd.WithPassword(etcd.RootUser, rootPassword))
			g.Expect(err).NotTo(HaveOccurred())
			list, err := root.MemberList(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list.Members).To(HaveLen(3))
			for _, ep := range eps {
				_, err := root.Status(ctx, ep)
				g.Expect(err).NotTo(HaveOccurred(), "Status of %s", ep)
				g.Expect(root.Health(ctx, ep)).To(Succeed())
				_, err = root.MemberListAt(ctx, ep)
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(root.Defragment(ctx, eps[1])).To(Succeed())
			_, err = root.AlarmList(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			snap, err := root.Snapshot(ctx, eps[2])
			g.Expect(err).NotTo(HaveOccurred())
			buf := make([]byte, 512)
			_, err = snap.Read(buf)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(snap.Close()).To(Succeed())

			// A learner refuses to exchange a password for a token, so a
			// dial to it alone fails; with the other members listed after
			// it, clientv3 gets the token from one of them and Status on
			// the learner's endpoint goes to the learner, as the member
			// controller's version check and a defragmentation dial.
			learner := etcdproc.NewMember(t, members[0].Bin(), "learner", members[0])
			var added etcd.Member
			// etcd refuses a reconfiguration until its peers have been
			// connected for a while.
			g.Eventually(func() error {
				added, _, err = root.MemberAddAsLearner(ctx, []string{learner.PeerURL})
				return err
			}).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
			initial := []string{"learner=" + learner.PeerURL}
			for _, m := range members {
				initial = append(initial, m.Name+"="+m.PeerURL)
			}
			g.Expect(learner.Join(strings.Join(initial, ","))).To(Succeed())
			g.Eventually(func() error {
				lc, err := authDial(t, append([]string{learner.ClientURL}, eps...), etcd.WithPassword(etcd.RootUser, rootPassword))
				if err != nil {
					return err
				}
				st, err := lc.Status(ctx, learner.ClientURL)
				if err == nil && !st.IsLearner {
					return fmt.Errorf("not a learner: %+v", st)
				}
				return err
			}).WithTimeout(time.Minute).WithPolling(200*time.Millisecond).Should(Succeed(), "the learner's Status, the token from the others")
			_, err = authDial(t, []string{learner.ClientURL}, etcd.WithPassword(etcd.RootUser, rootPassword))
			g.Expect(etcd.IsNotSupportedForLearner(err)).To(BeTrue(), "a dial to the learner alone: %v", err)
			_, err = root.MemberRemove(ctx, added.ID)
			g.Expect(err).NotTo(HaveOccurred())

			// A restarted member has forgotten every simple token.
			members[2].Stop()
			g.Expect(members[2].Restart()).To(Succeed())
			g.Expect(members[2].WaitReadyWith(30*time.Second, rootPassword)).To(Succeed())
			_, err = root.Status(ctx, eps[2])
			g.Expect(err).NotTo(HaveOccurred(), "Status on the restarted member with a token it never saw")
			g.Expect(root.Health(ctx, eps[2])).To(Succeed())
			g.Expect(root.Defragment(ctx, eps[2])).To(Succeed())
		})
	}
}

// TestAuthCertificate, on every pinned etcd with mutual client TLS: the
// operator, whose client certificate names root, turns authentication on
// without ever sending a password, and so does one whose certificate names
// another user (added with the root role and no password). Certificate
// identity needs no token, so it goes on working on a member without a
// quorum, where a password cannot even be exchanged for a token.
func TestAuthCertificate(t *testing.T) {
	for _, v := range etcdproc.Versions(t) {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			peerCA, clientCA := certstest.CA(t, "peer-ca"), certstest.CA(t, "client-ca")
			rootCert := certstest.ClientCert(t, clientCA, etcd.RootUser)
			opCert := certstest.ClientCert(t, clientCA, "etcd-operator")
			dir := t.TempDir()
			members := etcdproc.StartCluster(t, etcdproc.Binary(t, strings.TrimPrefix(v, "v")), etcdproc.Options{
				Members: 3, ClientScheme: "https", PeerScheme: "https",
				ClientTLS: certstest.ClientConfig([]*certs.KeyPair{clientCA}, &rootCert),
				MemberArgs: func(m *etcdproc.Member) []string {
					f := tlsproc.NewFiles(t, filepath.Join(dir, m.Name))
					f.Issue(t, "peer", peerCA, time.Hour)
					f.Issue(t, "client", clientCA, time.Hour)
					f.Trust(t, "peer", peerCA)
					f.Trust(t, "client", clientCA)
					return f.Flags(t, true)
				},
			})
			eps := etcdproc.ClientURLs(members)
			ctx := authCtx(t)
			asOp := etcd.WithClientTLS(certstest.ClientConfig([]*certs.KeyPair{clientCA}, &opCert))
			op, err := authDial(t, eps, asOp)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(op.EnableAuth(ctx, etcd.AuthSetup{RootPassword: rootPassword, CertificateUsers: []string{"etcd-operator"}})).To(Succeed())
			g.Expect(op.Defragment(ctx, eps[0])).To(Succeed(), "the operator's certificate user has the root role")

			asRoot := etcd.WithClientTLS(certstest.ClientConfig([]*certs.KeyPair{clientCA}, &rootCert))
			root, err := authDial(t, eps, asRoot)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(root.Defragment(ctx, eps[1])).To(Succeed())
			other := certstest.ClientCert(t, clientCA, "nobody")
			anon, err := authDial(t, eps, etcd.WithClientTLS(certstest.ClientConfig([]*certs.KeyPair{clientCA}, &other)))
			g.Expect(err).NotTo(HaveOccurred())
			err = anon.Defragment(ctx, eps[0])
			g.Expect(etcd.IsAuthFailed(err)).To(BeTrue(), "a certificate naming no user: %v", err)

			// Two of three gone: no quorum.
			members[1].Kill()
			members[2].Kill()
			st, err := root.Status(ctx, eps[0])
			g.Expect(err).NotTo(HaveOccurred(), "Status by certificate without a quorum")
			g.Expect(st.MemberID).NotTo(BeZero())
			_, err = authDial(t, eps[:1], asRoot, etcd.WithPassword(etcd.RootUser, rootPassword))
			g.Expect(err).To(HaveOccurred(), "a password needs a quorum to become a token")
			g.Expect(etcd.IsUnavailable(err)).To(BeTrue(), "and that is unavailability, not a refusal: %v", err)
		})
	}
}
