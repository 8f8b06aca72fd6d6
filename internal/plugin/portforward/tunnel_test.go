package portforward

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// kubelet plays the node's side of the v4 port-forward protocol: it opens
// both channels with the port, then upper-cases whatever arrives on the data
// channel, or, when refuse is set, reports it on the error channel.
type kubelet struct {
	t         *testing.T
	wantToken string
	refuse    string
	status    *metav1.Status
	dials     atomic.Int32
	lastQuery atomic.Value
}

func (k *kubelet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.dials.Add(1)
	k.lastQuery.Store(r.URL.Path + "?" + r.URL.RawQuery)
	if k.status != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(k.status.Code))
		_ = json.NewEncoder(w).Encode(k.status)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+k.wantToken {
		http.Error(w, "no token", http.StatusUnauthorized)
		return
	}
	up := websocket.Upgrader{Subprotocols: []string{Protocol}}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		k.t.Errorf("upgrade failed: %v", err)
		return
	}
	defer func() { _ = ws.Close() }()
	port := make([]byte, 2)
	binary.LittleEndian.PutUint16(port, 2379)
	for _, ch := range []byte{dataChannel, errorChannel} {
		// Split the preamble over two messages: the client must not rely on
		// message boundaries.
		_ = ws.WriteMessage(websocket.BinaryMessage, []byte{ch, port[0]})
		_ = ws.WriteMessage(websocket.BinaryMessage, []byte{ch, port[1]})
	}
	if k.refuse != "" {
		_ = ws.WriteMessage(websocket.BinaryMessage, append([]byte{errorChannel}, k.refuse...))
		_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		return
	}
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			return
		}
		if len(msg) == 0 || msg[0] != dataChannel {
			k.t.Errorf("client wrote on channel %v", msg)
			return
		}
		reply := append([]byte{dataChannel}, bytes.ToUpper(msg[1:])...)
		if err := ws.WriteMessage(websocket.BinaryMessage, reply); err != nil {
			return
		}
	}
}

func newTunnel(t *testing.T, k *kubelet) (*Tunnel, error) {
	t.Helper()
	srv := httptest.NewServer(k)
	t.Cleanup(srv.Close)
	f, err := New(&rest.Config{Host: srv.URL, BearerToken: k.wantToken})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tun, err := f.Forward(ctx, "ns", "pod-0", 2379)
	if err == nil {
		t.Cleanup(func() { _ = tun.Close() })
	}
	return tun, err
}

func TestTunnelCarriesBytes(t *testing.T) {
	g := NewWithT(t)
	k := &kubelet{t: t, wantToken: "s3cret"}
	tun, err := newTunnel(t, k)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tun.Endpoint()).To(HavePrefix("http://127.0.0.1:"))
	g.Expect(k.lastQuery.Load()).To(Equal("/api/v1/namespaces/ns/pods/pod-0/portforward?ports=2379"))

	for range 2 { // every local connection gets its own WebSocket
		c, err := net.Dial("tcp", tun.Addr())
		g.Expect(err).NotTo(HaveOccurred())
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Write([]byte("hello"))
		g.Expect(err).NotTo(HaveOccurred())
		got := make([]byte, 5)
		_, err = io.ReadFull(c, got)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(got)).To(Equal("HELLO"), "the port preamble must be stripped")
		g.Expect(c.Close()).To(Succeed())
	}
	g.Expect(k.dials.Load()).To(BeEquivalentTo(3), "one probe plus one per connection")

	g.Expect(tun.Close()).To(Succeed())
	_, err = net.Dial("tcp", tun.Addr())
	g.Expect(err).To(HaveOccurred(), "a closed tunnel no longer listens")
}

func TestCloseCutsConnectionsInFlight(t *testing.T) {
	g := NewWithT(t)
	tun, err := newTunnel(t, &kubelet{t: t, wantToken: "x"})
	g.Expect(err).NotTo(HaveOccurred())
	c, err := net.Dial("tcp", tun.Addr())
	g.Expect(err).NotTo(HaveOccurred())
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Write([]byte("ping"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = io.ReadFull(c, make([]byte, 4))
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(tun.Close()).To(Succeed(), "Close returns only once every connection has ended")
	_, err = c.Read(make([]byte, 1))
	g.Expect(err).To(MatchError(io.EOF))
	g.Expect(tun.LastError()).NotTo(HaveOccurred(), "our own Close is no failure")
}

func TestTunnelReportsTheKubeletsError(t *testing.T) {
	g := NewWithT(t)
	k := &kubelet{t: t, wantToken: "x", refuse: "error forwarding port 2379: connection refused"}
	tun, err := newTunnel(t, k)
	g.Expect(err).NotTo(HaveOccurred(), "the upgrade itself succeeds")
	c, err := net.Dial("tcp", tun.Addr())
	g.Expect(err).NotTo(HaveOccurred())
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(c)
	g.Expect(err).NotTo(HaveOccurred(), "the local side sees the connection close")
	g.Eventually(tun.LastError).Should(MatchError(ContainSubstring("connection refused")))
}

func TestForwardClassifiesRefusals(t *testing.T) {
	cases := []struct {
		name  string
		code  int32
		check func(error) bool
	}{
		{"forbidden", http.StatusForbidden, apierrors.IsForbidden},
		{"pod gone", http.StatusNotFound, apierrors.IsNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			reason := map[int32]metav1.StatusReason{403: metav1.StatusReasonForbidden, 404: metav1.StatusReasonNotFound}[tc.code]
			k := &kubelet{t: t, status: &metav1.Status{
				TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status:   metav1.StatusFailure, Code: tc.code, Reason: reason,
				Message: `pods "pod-0" is ` + string(reason),
			}}
			_, err := newTunnel(t, k)
			g.Expect(err).To(HaveOccurred())
			g.Expect(tc.check(err)).To(BeTrue(), "unclassified: %v", err)
			g.Expect(err.Error()).To(ContainSubstring("ns/pod-0"))
		})
	}
}

func TestForwardClassifiesPlainTextRefusals(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "proxy says no", http.StatusForbidden)
	}))
	defer srv.Close()
	f, err := New(&rest.Config{Host: srv.URL})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = f.Forward(context.Background(), "ns", "pod-0", 2379)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "unclassified: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("proxy says no"), "the body is the only explanation there is")
}

func TestPreambleWriterChecksThePort(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	p := &preambleWriter{w: &out, port: 2379}
	_, err := p.Write([]byte{0x01, 0x00, 'x'})
	g.Expect(err).To(MatchError(ContainSubstring("opened port 1")))

	out.Reset()
	p = &preambleWriter{w: &out, port: 2379}
	n, err := p.Write([]byte{0x4b, 0x09, 'o', 'k'})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(4))
	g.Expect(out.String()).To(Equal("ok"))
}
