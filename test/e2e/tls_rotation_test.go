//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
	"github.com/quorumctl/etcd-operator/test/linearizability"
)

// serviceWriter writes through the client Service, as an application does:
// each write is retried for as long as a leader change takes (etcd's
// election timeout is a second; a restarted member's connections are
// re-dialed), and a write that has not gone through by then failed.
type serviceWriter struct {
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	written  int
	failed   []string
	retried  int
	longest  time.Duration
	lastDone time.Time
}

// leaderChangeRetries bounds the retries of one write.
const leaderChangeRetries = 5 * time.Second

func startServiceWriter(cfg *tls.Config, endpoint string) (*serviceWriter, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, TLS: cfg, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	w := &serviceWriter{stop: make(chan struct{}), done: make(chan struct{}), lastDone: time.Now()}
	go func() {
		defer close(w.done)
		defer cli.Close()
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			began := time.Now()
			var err error
			for attempt := 0; ; attempt++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err = cli.Put(ctx, fmt.Sprintf("ca-rotation/writer/%d", i%50), fmt.Sprint(i))
				cancel()
				if err == nil || time.Since(began) > leaderChangeRetries {
					break
				}
				w.mu.Lock()
				w.retried++
				w.mu.Unlock()
				time.Sleep(200 * time.Millisecond)
			}
			now := time.Now()
			w.mu.Lock()
			if err != nil {
				w.failed = append(w.failed, fmt.Sprintf("%s: %v", began.Format(time.RFC3339Nano), err))
			} else {
				w.written++
				w.longest = max(w.longest, now.Sub(w.lastDone))
				w.lastDone = now
			}
			w.mu.Unlock()
		}
	}()
	return w, nil
}

func (w *serviceWriter) Stop() {
	close(w.stop)
	<-w.done
}

// caOf is the CA that signs a section's certificates now, from its Secret.
func (r *rollCluster) caOf(ctx context.Context, section string) (*x509.Certificate, *corev1.Secret) {
	s := &corev1.Secret{}
	r.g.Expect(r.c.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: v1alpha1.CASecretName(r.name, section)}, s)).To(Succeed())
	ca, err := certs.ParseCertificates(s.Data[corev1.TLSCertKey])
	r.g.Expect(err).NotTo(HaveOccurred())
	return ca[0], s
}

// TestCARotation: a requested CA rotation under the linearizability checker
// and a writer through the client Service, with clients that follow the
// administrators' Secret as a well-behaved client follows its files. The
// history is linearizable, members restart one at a time (each twice: to
// trust both CAs, then the new one alone), no write through the Service
// fails beyond the retries of a leader change, and the end state trusts and
// serves the new CAs only.
func TestCARotation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r := newRollCluster(ctx, t, "ca-rotate", func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{}
		framework.AllowE2EClients(c)
	})
	before := names(r.members(ctx))
	oldPeer, _ := r.caOf(ctx, v1alpha1.TLSSectionPeer)
	oldClient, _ := r.caOf(ctx, v1alpha1.TLSSectionClient)

	follow, err := framework.FollowClientSecret(ctx, r.c, r.ns, v1alpha1.AdminClientSecretName(r.name), r.serverName())
	r.g.Expect(err).NotTo(HaveOccurred())
	eps, err := env.MemberEndpoints(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	svc, err := env.ClientServiceEndpoint(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	https := framework.HTTPS([]string{svc})[0]
	checker, err := linearizability.Start(linearizability.Config{Endpoints: framework.HTTPS(append(eps, svc)), ClientsPerEndpoint: 2, TLS: follow})
	r.g.Expect(err).NotTo(HaveOccurred())
	writer, err := startServiceWriter(follow, https)
	r.g.Expect(err).NotTo(HaveOccurred())
	watch := env.WatchMembersDownTLS(ctx, r.ns, r.name, follow)
	defer func() { _, _ = watch.Stop() }()

	began := time.Now()
	r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[v1alpha1.RotateCAAnnotation] = "e2e-1"
	})).To(Succeed())
	var phases []string
	r.g.Expect(framework.WaitFor(ctx, 12*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		cl := r.get(ctx)
		st := cl.Status.TLS
		if st == nil || st.Peer == nil || st.Client == nil {
			return false, nil
		}
		phase := st.Peer.Rotation + "/" + st.Client.Rotation
		if len(phases) == 0 || phases[len(phases)-1] != phase {
			phases = append(phases, phase)
		}
		if st.RotateCARequest != "e2e-1" || st.Peer.Rotation != "" || st.Client.Rotation != "" {
			return false, nil
		}
		_, err := framework.WaitForClusterReady(ctx, r.c, r.ns, r.name, time.Second)
		return err == nil, nil
	})).To(Succeed(), "the rotation ended: %v", phases)
	took := time.Since(began)
	t.Logf("rotated in %s through %v", took.Round(time.Second), phases)

	writer.Stop()
	rep, err := checker.Stop().Check(linearizability.CheckOptions{VisualizationPath: filepath.Join(t.TempDir(), "history.html")})
	r.g.Expect(err).NotTo(HaveOccurred())
	t.Logf("linearizability: %s", rep)
	seen, err := watch.Stop()
	r.g.Expect(err).NotTo(HaveOccurred())
	t.Logf("members down, run by run:\n%s", seen.Timeline())
	writer.mu.Lock()
	t.Logf("service writer: %d writes, %d retries, longest gap between writes %s", writer.written, writer.retried, writer.longest.Round(time.Millisecond))
	r.g.Expect(writer.failed).To(BeEmpty(), "no write through the Service failed beyond a leader change's retries")
	writer.mu.Unlock()

	r.g.Expect(rep.Err()).NotTo(HaveOccurred(), "the history is linearizable")
	r.g.Expect(rep.Acknowledged).To(BeNumerically(">", 100), "writes went on throughout")
	r.g.Expect(seen.MaxDown).To(BeNumerically("<=", 1), "at no sample were two members down: %s", seen)
	r.g.Expect(seen.SeenDown()).To(ConsistOf(before), "every member restarted: %s", seen)
	r.g.Expect(strings.Join(phases, " ")).To(ContainSubstring(v1alpha1.CARotationSwitchingCertificates), "through the second pass")

	cl := r.get(ctx)
	r.g.Expect(names(r.members(ctx))).To(Equal(before), "the same members, restarted in place")
	newPeer, peerSecret := r.caOf(ctx, v1alpha1.TLSSectionPeer)
	newClient, clientSecret := r.caOf(ctx, v1alpha1.TLSSectionClient)
	r.g.Expect(newPeer.Equal(oldPeer)).To(BeFalse(), "a new peer CA")
	r.g.Expect(newClient.Equal(oldClient)).To(BeFalse(), "a new client CA")
	for _, s := range []*corev1.Secret{peerSecret, clientSecret} {
		r.g.Expect(s.Data).NotTo(HaveKey("next.crt"))
		r.g.Expect(s.Data).NotTo(HaveKey("previous.crt"), "the old CA is forgotten")
	}
	r.expectServedFrom(ctx, newClient, "", v1alpha1.ClientPort)
	r.expectServedFrom(ctx, newPeer, "", v1alpha1.PeerPort)
	for _, m := range r.members(ctx) {
		for section, e := range map[string]*v1alpha1.MemberTLSEndpoint{"peer": m.Spec.TLS.Peer, "client": m.Spec.TLS.Client} {
			cm := &corev1.ConfigMap{}
			r.g.Expect(r.c.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: e.TrustBundle}, cm)).To(Succeed())
			b, err := certs.ParseBundle([]byte(cm.Data["ca.crt"]))
			r.g.Expect(err).NotTo(HaveOccurred())
			r.g.Expect(b).To(HaveLen(1), "%s trusts one %s CA", m.Name, section)
		}
	}
	r.g.Expect(cl.Status.TLS.Peer.TrustBundle).To(Equal(r.members(ctx)[0].Spec.TLS.Peer.TrustBundle))
	r.expectEventsOf(ctx, "CARotationStarted", "CARotationSwitching", "CARotationDroppingOldCA", "CARotationCompleted")
	r.expectSentinelEverywhere(ctx)
}

// expectEventsOf: the cluster has an Event of each reason.
func (r *rollCluster) expectEventsOf(ctx context.Context, reasons ...string) {
	list, err := env.Clientset.EventsV1().Events(r.ns).List(ctx, metav1.ListOptions{})
	r.g.Expect(err).NotTo(HaveOccurred())
	seen := map[string]bool{}
	for _, e := range list.Items {
		if e.Regarding.Kind == "EtcdCluster" && e.Regarding.Name == r.name {
			seen[e.Reason] = true
		}
	}
	for _, reason := range reasons {
		r.g.Expect(seen).To(HaveKey(reason), "an Event %s", reason)
	}
}
