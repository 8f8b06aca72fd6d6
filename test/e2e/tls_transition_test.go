//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// TestPlainToTLSUnderAWriter (issue 28, acceptance 3): a plaintext cluster
// of three turns TLS on under a writer through the client Service. The
// writer writes plaintext until the cluster says clients may switch, then
// https with the administrators' certificate; the user releases plaintext;
// no write fails beyond a leader change's retries, members are down at
// most one at a time, and the end state is what a cluster created with TLS
// runs: https peer and client URLs, plaintext refused, a client
// certificate required.
func TestPlainToTLSUnderAWriter(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	r := newRollCluster(ctx, t, "plain-to-tls", func(c *v1alpha1.EtcdCluster) {
		framework.AllowE2EClients(c)
	})
	before := names(r.members(ctx))
	svc, err := env.ClientServiceEndpoint(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	https := framework.HTTPS([]string{svc})[0]

	var cfgMu sync.Mutex
	var follow *tls.Config
	current := func() *tls.Config { cfgMu.Lock(); defer cfgMu.Unlock(); return follow }
	watch := env.WatchMembersDownEitherScheme(ctx, r.ns, r.name, current)
	defer func() { _, _ = watch.Stop() }()
	plainWriter, err := startServiceWriter(nil, svc)
	r.g.Expect(err).NotTo(HaveOccurred())

	began := time.Now()
	r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{} })).To(Succeed(), "a running cluster may turn TLS on")

	var phases []string
	note := func(st *v1alpha1.TLSStatus) {
		phase := "none"
		if st != nil && st.Transition != nil {
			phase = st.Transition.Phase + "/" + st.Transition.Wait
		}
		if len(phases) == 0 || phases[len(phases)-1] != phase {
			phases = append(phases, phase)
		}
	}
	r.g.Expect(framework.WaitFor(ctx, 10*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		st := r.get(ctx).Status.TLS
		note(st)
		return st != nil && st.Transition != nil && st.Transition.Phase == "ClientsMaySwitch" && st.Transition.ClientsHTTPS, nil
	})).To(Succeed(), "every member serves both schemes: %v", phases)
	t.Logf("clients may switch after %s", time.Since(began).Round(time.Second))

	// The user's clients move to https, with the administrators'
	// certificate, and plaintext is released once they have.
	cfg, err := framework.FollowClientSecret(ctx, r.c, r.ns, v1alpha1.AdminClientSecretName(r.name), r.serverName())
	r.g.Expect(err).NotTo(HaveOccurred())
	cfgMu.Lock()
	follow = cfg
	cfgMu.Unlock()
	tlsWriter, err := startServiceWriter(cfg, https)
	r.g.Expect(err).NotTo(HaveOccurred())
	plainWriter.Stop()
	r.g.Expect(r.get(ctx).Status.TLS.Transition.Wait).To(Equal("PlaintextInUse"), "the second pass waits for the user")
	r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[v1alpha1.ReleasePlaintextAnnotation] = "e2e"
	})).To(Succeed())

	r.g.Expect(framework.WaitFor(ctx, 10*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		st := r.get(ctx).Status.TLS
		note(st)
		if st == nil || st.Transition != nil {
			return false, nil
		}
		_, err := framework.WaitForClusterReady(ctx, r.c, r.ns, r.name, time.Second)
		return err == nil, nil
	})).To(Succeed(), "the transition ended: %v", phases)
	t.Logf("TLS on in %s through %v", time.Since(began).Round(time.Second), phases)

	tlsWriter.Stop()
	seen, err := watch.Stop()
	r.g.Expect(err).NotTo(HaveOccurred())
	t.Logf("members down, run by run:\n%s", seen.Timeline())
	for name, w := range map[string]*serviceWriter{"plaintext": plainWriter, "https": tlsWriter} {
		w.mu.Lock()
		t.Logf("%s writer: %d writes, %d retries, longest gap between writes %s", name, w.written, w.retried, w.longest.Round(time.Millisecond))
		r.g.Expect(w.failed).To(BeEmpty(), "no %s write through the Service failed beyond a leader change's retries", name)
		r.g.Expect(w.written).To(BeNumerically(">", 10), "the %s writer wrote", name)
		w.mu.Unlock()
	}
	r.g.Expect(seen.MaxDown).To(BeNumerically("<=", 1), "at no sample were two members down: %s", seen)
	r.g.Expect(seen.SeenDown()).To(ConsistOf(before), "every member restarted: %s", seen)
	r.g.Expect(strings.Join(phases, " ")).To(ContainSubstring("RefusingPlaintext"), "through the second pass")
	r.g.Expect(names(r.members(ctx))).To(Equal(before), "the same members, restarted in place")
	r.expectEventsOf(ctx, "TLSAdding", "TLSClientsMaySwitch", "TLSRefusingPlaintext", "TLSTransitionCompleted")

	// The end state is step 1's defaults.
	c, err := framework.EtcdTLSClient(cfg, https)
	r.g.Expect(err).NotTo(HaveOccurred())
	defer c.Close()
	_, err = c.Put(ctx, "plain-to-tls", "ok")
	r.g.Expect(err).NotTo(HaveOccurred(), "https with a client certificate works")
	list, err := c.MemberList(ctx)
	r.g.Expect(err).NotTo(HaveOccurred())
	r.g.Expect(list.Members).To(HaveLen(3))
	for _, m := range list.Members {
		r.g.Expect(m.PeerURLs[0]).To(HavePrefix("https://"), "peer traffic of %s is TLS", m.Name)
		r.g.Expect(m.ClientURLs[0]).To(HavePrefix("https://"))
	}
	plain, err := framework.EtcdClient(svc)
	r.g.Expect(err).NotTo(HaveOccurred())
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = plain.Get(pctx, "plain-to-tls")
	pcancel()
	plain.Close()
	r.g.Expect(err).To(HaveOccurred(), "plaintext is refused")
	noCert, err := r.adminTLS(ctx).TLSConfig(r.serverName(), false)
	r.g.Expect(err).NotTo(HaveOccurred())
	anon, err := framework.EtcdTLSClient(noCert, https)
	r.g.Expect(err).NotTo(HaveOccurred())
	actx, acancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = anon.Get(actx, "plain-to-tls")
	acancel()
	anon.Close()
	r.g.Expect(err).To(HaveOccurred(), "a client without a certificate is refused")

	err = r.edit(ctx, func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = nil })
	r.g.Expect(err).To(HaveOccurred(), "turning TLS off is refused")
	r.g.Expect(err.Error()).To(ContainSubstring("turning TLS off is refused"))
	r.expectSentinelEverywhere(ctx)
}
