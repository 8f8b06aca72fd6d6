//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// configMapWriter creates ConfigMaps through the second kube-apiserver
// every 100 ms, one try each, as a controller would; a create is
// acknowledged when the apiserver answered 201. The apiserver it talks to
// is swapped when the administrator replaces it, and failures are counted
// by the stretch of the test they fell in.
type configMapWriter struct {
	stop, done chan struct{}
	mu         sync.Mutex
	server     *secondAPIServer
	stretch    string
	acked      []string
	failed     map[string]int
	order      []string
}

func startConfigMapWriter(ctx context.Context, a *secondAPIServer) *configMapWriter {
	w := &configMapWriter{stop: make(chan struct{}), done: make(chan struct{}), server: a, failed: map[string]int{}}
	w.enter("before the rotation")
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			w.mu.Lock()
			cfg, stretch := w.server.config(), w.stretch
			w.mu.Unlock()
			name := fmt.Sprintf("cm-%05d", i)
			cs, err := kubernetes.NewForConfig(cfg)
			if err == nil {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err = cs.CoreV1().ConfigMaps("default").Create(cctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				cancel()
			}
			w.mu.Lock()
			if err == nil {
				w.acked = append(w.acked, name)
			} else {
				w.failed[stretch]++
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// enter names the stretch of the test the next creates fall in.
func (w *configMapWriter) enter(stretch string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stretch = stretch
	w.order = append(w.order, stretch)
}

func (w *configMapWriter) ackedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// swap points the writer at another apiserver.
func (w *configMapWriter) swap(a *secondAPIServer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.server = a
}

func (w *configMapWriter) Stop() {
	close(w.stop)
	<-w.done
}

// failedOutside counts the creates that failed in stretches other than
// those named.
func (w *configMapWriter) failedOutside(stretches ...string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for s, f := range w.failed {
		if !slices.Contains(stretches, s) {
			n += f
		}
	}
	return n
}

// summary says, stretch by stretch, how many creates failed.
func (w *configMapWriter) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var parts []string
	total := 0
	for _, s := range w.order {
		parts = append(parts, fmt.Sprintf("%s: %d", s, w.failed[s]))
		total += w.failed[s]
	}
	return fmt.Sprintf("%d acknowledged, %d failed (%s)", len(w.acked), total, strings.Join(parts, "; "))
}

// TestKubernetesDatastoreThroughCARotation: a second kube-apiserver stores
// in a TLS cluster over mutual TLS and creates ConfigMaps throughout a
// requested CA rotation, handed its files as an administrator hands them
// to a client that loads its CA only at start (see "Clients that cannot
// reload their CA" in docs/tls.md):
//
//  1. spec.rollout.paused and the keep-old-ca annotation are set with the
//     request: the rotation begins (the administrators' Secret's ca.crt
//     holds both CAs) and pass 1's restarts wait;
//  2. the apiserver is replaced by one given ca.crt with both CAs and the
//     certificate of the old CA, and the rollout is unpaused;
//  3. once the switch of pass 2 has reissued the administrators'
//     certificate from the new CA, the apiserver is replaced by one given
//     it; the annotation holds the rotation before any member stops
//     trusting the old CA, and is removed;
//  4. pass 3 ends with members that trust the new CA alone, and the
//     apiserver goes on creating.
//
// Every ConfigMap the apiserver acknowledged is there at the end, through
// the apiserver and in etcd; no create failed outside the apiserver's own
// restarts (handed a file too late, it fails handshakes once pass 3
// restarts the member it is connected to); members restarted one at a
// time; the rotation completed.
func TestKubernetesDatastoreThroughCARotation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	r := newRollCluster(ctx, t, "apiserver-rotate", func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{}
		framework.AllowE2EClients(c)
	})
	before := names(r.members(ctx))
	oldCA, _ := r.caOf(ctx, v1alpha1.TLSSectionClient)
	adminSecret := v1alpha1.AdminClientSecretName(r.name)

	a, image := newSecondAPIServer(ctx, r)
	a.etcdSecret = r.handAPIServerFiles(ctx, 0, "old", oldCA, oldCA)
	a.start(ctx, image)
	w := startConfigMapWriter(ctx, a)
	defer func() {
		select {
		case <-w.done:
		default:
			w.Stop()
		}
	}()
	waitCreated := func(what string) {
		n := w.ackedCount()
		r.g.Eventually(w.ackedCount, 3*time.Minute, time.Second).Should(BeNumerically(">", n+10), "ConfigMaps are created %s", what)
	}
	// replace starts an apiserver on the files of the given Secret, points
	// the writer at it once it is ready, and deletes the one before: a
	// control plane's rolling restart.
	replace := func(files string) {
		next := &secondAPIServer{r: r, token: a.token, etcdSecret: files}
		next.start(ctx, image)
		w.swap(next)
		r.g.Expect(env.Clientset.CoreV1().Pods(r.ns).Delete(ctx, a.pod.Name, metav1.DeleteOptions{})).To(Succeed())
		a = next
	}
	waitCreated("before the rotation")

	follow, err := framework.FollowClientSecret(ctx, r.c, r.ns, adminSecret, r.serverName())
	r.g.Expect(err).NotTo(HaveOccurred())
	watch := env.WatchMembersDownTLS(ctx, r.ns, r.name, follow)
	defer func() { _, _ = watch.Stop() }()

	const restart1, restart2 = "apiserver restart 1 (both CAs, old certificate)", "apiserver restart 2 (both CAs, new certificate)"

	// 1. Pause, hold the old CA, ask for the rotation.
	const request = "e2e-apiserver"
	r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[v1alpha1.RotateCAAnnotation] = request
		c.Annotations[v1alpha1.KeepOldCAAnnotation] = "until the apiserver has its new certificate"
		c.Spec.Rollout.Paused = true
	})).To(Succeed())
	var newCA *x509.Certificate
	r.g.Expect(framework.WaitFor(ctx, 3*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		m, err := framework.ReadClientSecret(ctx, r.c, r.ns, adminSecret)
		if err != nil {
			return false, err
		}
		b, err := certs.ParseBundle(m.CAPEM)
		if err != nil || len(b) != 2 || !b.Contains(oldCA) {
			return false, err
		}
		if st := r.get(ctx).Status.TLS; st == nil || st.Client == nil || st.Client.Rotation != v1alpha1.CARotationTrustingNewCA {
			return false, nil
		}
		for _, c := range b {
			if !c.Equal(oldCA) {
				newCA = c
			}
		}
		return true, nil
	})).To(Succeed(), "pass 1 is under way and the administrators' ca.crt holds the old and the new client CA")

	// 2. The apiserver is given both CAs, which it loads only at start.
	w.enter(restart1)
	replace(r.handAPIServerFiles(ctx, 1, "old", oldCA, oldCA, newCA))
	w.enter("passes 1 and 2")
	waitCreated("by the apiserver that trusts both CAs")
	r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) { c.Spec.Rollout.Paused = false })).To(Succeed())

	// 3. After the switch, the apiserver is given its certificate of the
	// new CA, while the annotation keeps the old CA trusted.
	r.g.Expect(framework.WaitFor(ctx, 10*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		m, err := framework.ReadClientSecret(ctx, r.c, r.ns, adminSecret)
		if err != nil {
			return false, err
		}
		leaf, err := certs.ParseCertificates(m.CertPEM)
		return err == nil && certs.IssuedBy(leaf[0], newCA), err
	})).To(Succeed(), "the administrators' certificate is reissued from the new CA")
	w.enter(restart2)
	replace(r.handAPIServerFiles(ctx, 2, "new", newCA, oldCA, newCA))
	w.enter("waiting on the hold")
	r.g.Expect(framework.WaitFor(ctx, 10*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		c := meta.FindStatusCondition(r.get(ctx).Status.Conditions, v1alpha1.ProgressingCondition)
		return c != nil && c.Reason == v1alpha1.RolloutPausedReason && strings.Contains(c.Message, v1alpha1.KeepOldCAAnnotation), nil
	})).To(Succeed(), "every member serves the new certificates and the annotation holds the drop of the old CA")
	r.expectTrustBoth(ctx, oldCA, newCA)
	waitCreated("while held")

	// 4. Pass 3.
	w.enter("pass 3")
	r.g.Expect(r.edit(ctx, func(c *v1alpha1.EtcdCluster) { delete(c.Annotations, v1alpha1.KeepOldCAAnnotation) })).To(Succeed())
	var phases []string
	r.g.Expect(framework.WaitFor(ctx, 10*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		st := r.get(ctx).Status.TLS
		if st == nil || st.Peer == nil || st.Client == nil {
			return false, nil
		}
		phase := st.Peer.Rotation + "/" + st.Client.Rotation
		if len(phases) == 0 || phases[len(phases)-1] != phase {
			phases = append(phases, phase)
		}
		if st.RotateCARequest != request || st.Peer.Rotation != "" || st.Client.Rotation != "" {
			return false, nil
		}
		_, err := framework.WaitForClusterReady(ctx, r.c, r.ns, r.name, time.Second)
		return err == nil, nil
	})).To(Succeed(), "the rotation ended: %v", phases)
	t.Logf("pass 3 through %v", phases)
	w.enter("after the rotation")
	// Every member restarted in pass 3 onto the new CA alone: whatever
	// connection the apiserver holds now was opened with its new
	// certificate to a member serving one of the new CA.
	waitCreated("after the rotation, by members that trust the new CA alone")
	w.Stop()
	t.Logf("ConfigMaps: %s", w.summary())
	// The apiserver was handed what each step needed before the step:
	// outside its own restarts (a replacement, whose failures are no
	// acknowledged writes) no create failed, members' restarts included.
	r.g.Expect(w.failedOutside(restart1, restart2)).To(BeZero(), "no create failed outside the apiserver's restarts: %s", w.summary())

	seen, err := watch.Stop()
	r.g.Expect(err).NotTo(HaveOccurred())
	t.Logf("members down, run by run:\n%s", seen.Timeline())
	r.g.Expect(seen.MaxDown).To(BeNumerically("<=", 1), "at no sample were two members down: %s", seen)
	r.g.Expect(seen.SeenDown()).To(ConsistOf(before), "every member restarted: %s", seen)
	r.g.Expect(names(r.members(ctx))).To(Equal(before), "the same members, restarted in place")
	current, caSecret := r.caOf(ctx, v1alpha1.TLSSectionClient)
	r.g.Expect(current.Equal(newCA)).To(BeTrue(), "the new client CA signs")
	r.g.Expect(caSecret.Data).NotTo(HaveKey("previous.crt"), "the old CA is forgotten")
	r.expectServedFrom(ctx, newCA, "", v1alpha1.ClientPort)
	r.expectEventsOf(ctx, "CARotationStarted", "CARotationSwitching", "CARotationDroppingOldCA", "CARotationCompleted")

	r.g.Expect(a.readyz(ctx)).To(Succeed(), "/readyz is OK")
	cs, err := kubernetes.NewForConfig(a.config())
	r.g.Expect(err).NotTo(HaveOccurred())
	list, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	r.g.Expect(err).NotTo(HaveOccurred())
	listed := map[string]bool{}
	for _, cm := range list.Items {
		listed[cm.Name] = true
	}
	stored := r.storedConfigMaps(ctx, follow)
	w.mu.Lock()
	defer w.mu.Unlock()
	var missingListed, missingStored []string
	for _, name := range w.acked {
		if !listed[name] {
			missingListed = append(missingListed, name)
		}
		if !stored[name] {
			missingStored = append(missingStored, name)
		}
	}
	t.Logf("%d ConfigMaps acknowledged, %d listed through the apiserver, %d stored in etcd", len(w.acked), len(listed), len(stored))
	r.g.Expect(missingListed).To(BeEmpty(), "every acknowledged ConfigMap is listed by the apiserver")
	r.g.Expect(missingStored).To(BeEmpty(), "every acknowledged ConfigMap is in etcd")
}

// handAPIServerFiles writes the files an administrator gives the second
// apiserver into a Secret of their own, copied from the administrators'
// Secret as it is now, and returns its name. The copy is never updated:
// what the apiserver holds is what was handed to it, not what the kubelet
// has brought into its Pod so far. The certificate must be one of issuer
// (called which in the log), and ca.crt must hold exactly trusted.
func (r *rollCluster) handAPIServerFiles(ctx context.Context, n int, which string, issuer *x509.Certificate, trusted ...*x509.Certificate) string {
	m, err := framework.ReadClientSecret(ctx, r.c, r.ns, v1alpha1.AdminClientSecretName(r.name))
	r.g.Expect(err).NotTo(HaveOccurred())
	leaf, err := certs.ParseCertificates(m.CertPEM)
	r.g.Expect(err).NotTo(HaveOccurred())
	r.g.Expect(certs.IssuedBy(leaf[0], issuer)).To(BeTrue(), "files %d: the certificate is of the %s CA", n, which)
	b, err := certs.ParseBundle(m.CAPEM)
	r.g.Expect(err).NotTo(HaveOccurred())
	r.g.Expect(b).To(HaveLen(len(trusted)), "files %d: ca.crt", n)
	for _, ca := range trusted {
		r.g.Expect(b.Contains(ca)).To(BeTrue(), "files %d: ca.crt holds CA serial %s", n, ca.SerialNumber)
	}
	name := fmt.Sprintf("second-apiserver-etcd-%d", n)
	r.g.Expect(r.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns},
		Data: map[string][]byte{"ca.crt": m.CAPEM, corev1.TLSCertKey: m.CertPEM, corev1.TLSPrivateKeyKey: m.KeyPEM}})).To(Succeed())
	r.t.Logf("apiserver files %d: ca.crt of %d CAs, certificate of the %s CA", n, len(b), which)
	return name
}

// expectTrustBoth: the client CA's Secret still keeps the old CA, and every
// member's client trust bundle holds both CAs; no member has restarted
// onto the new CA alone.
func (r *rollCluster) expectTrustBoth(ctx context.Context, oldCA, newCA *x509.Certificate) {
	current, s := r.caOf(ctx, v1alpha1.TLSSectionClient)
	r.g.Expect(current.Equal(newCA)).To(BeTrue(), "the new client CA signs")
	r.g.Expect(s.Data).To(HaveKey("previous.crt"), "the old client CA is kept")
	for _, m := range r.members(ctx) {
		cm := &corev1.ConfigMap{}
		r.g.Expect(r.c.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: m.Spec.TLS.Client.TrustBundle}, cm)).To(Succeed())
		b, err := certs.ParseBundle([]byte(cm.Data["ca.crt"]))
		r.g.Expect(err).NotTo(HaveOccurred())
		r.g.Expect(b.Contains(oldCA) && b.Contains(newCA)).To(BeTrue(), "%s trusts the old and the new client CA", m.Name)
	}
}

// storedConfigMaps are the names of the ConfigMaps of namespace default
// the second apiserver keeps in etcd, read from etcd itself.
func (r *rollCluster) storedConfigMaps(ctx context.Context, tlsConfig *tls.Config) map[string]bool {
	svc, err := env.ClientServiceEndpoint(ctx, r.ns, r.name)
	r.g.Expect(err).NotTo(HaveOccurred())
	cli, err := clientv3.New(clientv3.Config{Endpoints: framework.HTTPS([]string{svc}), DialTimeout: 5 * time.Second, TLS: tlsConfig, Logger: zap.NewNop()})
	r.g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	const prefix = "/second-apiserver/configmaps/default/"
	gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := cli.Get(gctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	r.g.Expect(err).NotTo(HaveOccurred())
	out := map[string]bool{}
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), prefix)] = true
	}
	return out
}
