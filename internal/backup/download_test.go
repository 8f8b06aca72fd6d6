package backup

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func TestStoredAsSent(t *testing.T) {
	for _, tc := range []struct {
		c    v1alpha1.SnapshotCompression
		e    v1alpha1.SnapshotEncryptionScheme
		want bool
	}{
		{"", "", true}, // a snapshot from before compression
		{v1alpha1.CompressionNone, "", true},
		{v1alpha1.CompressionZstd, "", false},
		{v1alpha1.CompressionNone, v1alpha1.EncryptionAge, false},
		{v1alpha1.CompressionZstd, v1alpha1.EncryptionAge, false},
	} {
		if got := StoredAsSent(tc.c, tc.e); got != tc.want {
			t.Errorf("StoredAsSent(%q, %q) = %v, want %v", tc.c, tc.e, got, tc.want)
		}
	}
}

func TestCheckDownload(t *testing.T) {
	const sha = "aa"
	good := Download{Ended: true, Size: 10, SHA256: sha, Verified: true}
	digest := errors.New("etcd's digest did not match")
	reset := errors.New("connection reset")
	for _, tc := range []struct {
		name     string
		d        func(Download) Download
		mismatch bool
		// says is in the message.
		says string
	}{
		{"good", func(d Download) Download { return d }, false, ""},
		{"another SHA-256", func(d Download) Download { d.SHA256 = "bb"; return d }, true, "downloaded 10 bytes with SHA-256 bb"},
		{"another size", func(d Download) Download { d.Size = 11; return d }, true, "recorded as 10 bytes with aa"},
		// A changed object stops the decoder first; its mismatch is what
		// is reported, the decoder's error beside it.
		{"damaged, the decoder stopped", func(d Download) Download {
			d.SHA256, d.Verified, d.DecodeErr = "bb", false, digest
			return d
		}, true, "(decoding stopped: etcd's digest did not match)"},
		// The recorded object, but etcd's digest inside it failed.
		{"the recorded object, etcd's digest failed", func(d Download) Download {
			d.Verified, d.DecodeErr = false, fmt.Errorf("%w: etcd's", ErrChecksumMismatch)
			return d
		}, true, "etcd's"},
		{"the store's stream broke", func(d Download) Download {
			d.Ended, d.SHA256, d.Verified, d.DecodeErr, d.ReadErr = false, "", false, reset, reset
			return d
		}, false, "connection reset"},
		{"the file could not be written", func(d Download) Download {
			d.Verified, d.DecodeErr = false, errors.New("no space left on device")
			return d
		}, false, "no space left"},
		{"never verified", func(d Download) Download { d.Verified = false; return d }, true, "before etcd's digest was checked"},
		{"not read to its end", func(d Download) Download { d.Ended = false; return d }, false, "not read to its end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckDownload(tc.d(good), 10, sha)
			if tc.says == "" {
				if err != nil {
					t.Fatalf("a good download refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v; want it to say %q", err, tc.says)
			}
			if got := errors.Is(err, ErrChecksumMismatch); got != tc.mismatch {
				t.Fatalf("err = %v: a mismatch %v, want %v", err, got, tc.mismatch)
			}
			if CodeOf(err) == CodeChecksumMismatch != tc.mismatch {
				t.Fatalf("code %s for %v", CodeOf(err), err)
			}
		})
	}
}
