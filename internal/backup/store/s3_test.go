package store

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/quorumctl/etcd-operator/internal/backup"
)

// Without static credentials the client is refused unless ambient ones are
// allowed: the default chain never runs by accident.
func TestNewS3RefusesAmbientCredentialsUnlessAllowed(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "from-the-environment")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "from-the-environment")
	ctx := context.Background()
	if _, err := NewS3(ctx, S3Config{Bucket: "b"}); !errors.Is(err, backup.ErrCredentials) {
		t.Fatalf("no static credentials, ambient not allowed: err = %v, want ErrCredentials", err)
	}
	if _, err := NewS3(ctx, S3Config{Bucket: "b", AccessKeyID: "id", SecretAccessKey: "secret"}); err != nil {
		t.Fatalf("static credentials: %v", err)
	}
	st, err := NewS3(ctx, S3Config{Bucket: "b", AmbientCredentials: true})
	if err != nil {
		t.Fatalf("ambient allowed: %v", err)
	}
	creds, err := st.client.Options().Credentials.Retrieve(ctx)
	if err != nil || creds.AccessKeyID != "from-the-environment" {
		t.Fatalf("ambient allowed: the default chain gave %q, %v", creds.AccessKeyID, err)
	}
}

// Uploads over http:// sign UNSIGNED-PAYLOAD, as the SDK does over
// https://, instead of a SHA-256 of the body: the snapshot's own SHA-256s
// are what is checked end to end, and the payload hash cost a pass over
// every byte on each side (docs/design/0028-snapshot-throughput.md).
func TestS3UploadsOverHTTPDoNotHashThePayload(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Header.Get("X-Amz-Content-Sha256"))
		mu.Unlock()
		w.Header().Set("ETag", `"0"`)
	}))
	defer srv.Close()
	ctx := context.Background()
	st, err := NewS3(ctx, S3Config{Endpoint: srv.URL, Bucket: "b", ForcePathStyle: true, AccessKeyID: "id", SecretAccessKey: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	if err := Put(ctx, st, "k", []byte("a small object, sent in one PutObject")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "PUT UNSIGNED-PAYLOAD" {
		t.Fatalf("requests %q; want one PUT signed UNSIGNED-PAYLOAD", seen)
	}
}
