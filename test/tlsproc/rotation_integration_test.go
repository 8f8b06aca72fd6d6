//go:build integration

package tlsproc_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/certs/certstest"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// TestCARotationInThreePasses plays the operator's CA rotation (design 0020)
// on real etcd processes with mutual TLS: trust both CAs (a restart each),
// switch every certificate in place (no restart), trust the new CAs alone
// (a restart each). The cluster answers after every step, a write made
// through one member is read through the others (peer TLS works), and what
// the operator reads to see the switch (certs.ServedCertificate, which
// presents no client certificate) works on a port that demands one.
func TestCARotationInThreePasses(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := startTLSCluster(t, true)
	newPeer, newClient := certstest.CA(t, "peer-ca-2"), certstest.CA(t, "client-ca-2")
	newOperator := certstest.ClientCert(t, newClient, "root")
	both := []*certs.KeyPair{c.clientCA, newClient}

	step := 0
	check := func(what string, trust []*certs.KeyPair, useNew bool) {
		t.Helper()
		step++
		cert := &c.operator
		if useNew {
			cert = &newOperator
		}
		cli, err := c.dial(t, etcd.WithClientTLS(certstest.ClientConfig(trust, cert)))
		g.Expect(err).NotTo(HaveOccurred(), what)
		defer cli.Close()
		for _, m := range c.members {
			g.Expect(cli.Health(ctx, m.ClientURL)).To(Succeed(), "%s: %s is healthy", what, m.Name)
		}
		for i, m := range c.members {
			g.Expect(rawPut(m.ClientURL, certstest.ClientConfig(trust, cert), fmt.Sprintf("k%d", step), m.Name)).To(Succeed(), "%s: a write through %s", what, m.Name)
			other := c.members[(i+1)%len(c.members)]
			g.Expect(rawGetValue(other.ClientURL, certstest.ClientConfig(trust, cert), fmt.Sprintf("k%d", step))).To(Equal(m.Name),
				"%s: read through %s, replicated over peer TLS", what, other.Name)
		}
	}
	restart := func(what string, trust []*certs.KeyPair, useNew bool) {
		t.Helper()
		for _, m := range c.members {
			m.Stop()
			cert := &c.operator
			if useNew {
				cert = &newOperator
			}
			g.Expect(m.RestartWithFlags(m.Args(), "", certstest.ClientConfig(trust, cert))).To(Succeed())
			g.Expect(m.WaitReady(30*time.Second)).To(Succeed(), "%s: %s back\n%s", what, m.Name, m.LogTail(20))
		}
	}
	check("before", []*certs.KeyPair{c.clientCA}, false)

	// Pass 1: both CAs trusted, old certificates.
	for _, m := range c.members {
		c.files[m.Name].Trust(t, "peer", c.peerCA, newPeer)
		c.files[m.Name].Trust(t, "client", c.clientCA, newClient)
	}
	restart("pass 1", both, false)
	check("pass 1", both, false)

	// Pass 2: new certificates, in place.
	pids := map[string]int{}
	for _, m := range c.members {
		pids[m.Name] = m.PID()
		c.files[m.Name].Issue(t, "peer", newPeer, time.Hour)
		c.files[m.Name].Issue(t, "client", newClient, time.Hour)
	}
	for _, m := range c.members {
		for _, ep := range []string{m.ClientURL, m.PeerURL} {
			g.Eventually(func() error {
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				served, err := certs.ServedCertificate(cctx, ep)
				if err != nil {
					return err
				}
				if !certs.IssuedBy(served, newPeer.Cert) && !certs.IssuedBy(served, newClient.Cert) {
					return fmt.Errorf("%s still serves a certificate of the old CA", ep)
				}
				return nil
			}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		}
	}
	check("pass 2, old client certificate", both, false)
	check("pass 2, new client certificate", both, true)
	for _, m := range c.members {
		g.Expect(m.PID()).To(Equal(pids[m.Name]), "pass 2 restarts nothing")
	}

	// Pass 3: the new CAs alone.
	for _, m := range c.members {
		c.files[m.Name].Trust(t, "peer", newPeer)
		c.files[m.Name].Trust(t, "client", newClient)
	}
	restart("pass 3", []*certs.KeyPair{newClient}, true)
	check("pass 3", []*certs.KeyPair{newClient}, true)
	g.Expect(rawGet(c.members[0].ClientURL, certstest.ClientConfig([]*certs.KeyPair{newClient}, &c.operator))).NotTo(Succeed(),
		"a certificate of the old client CA is refused at the end")
}

// rawPut writes one key with plain clientv3.
func rawPut(endpoint string, cfg *tls.Config, key, value string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, TLS: cfg, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = cli.Put(ctx, key, value)
	return err
}

// rawGetValue reads one key, linearizably, with plain clientv3.
func rawGetValue(endpoint string, cfg *tls.Config, key string) (string, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, TLS: cfg, Logger: zap.NewNop()})
	if err != nil {
		return "", err
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		return "", err
	}
	return string(resp.Kvs[0].Value), nil
}
