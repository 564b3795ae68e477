package tgrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"time"
	"unsafe"

	tgsync "github.com/testground/sync-service"
	"github.com/testground/testground/pkg/logging"
	"go.uber.org/zap/zapcore"
)

// serveSync is the sync service's own websocket handler, the one
// tgsync.NewServer installs. NewServer always listens on ":port", every
// interface; p2pmsg's runs stay on loopback, so tgrun serves the same
// handler on a 127.0.0.1 listener of its own.
//
//go:linkname serveSync github.com/testground/sync-service.(*Server).handler
func serveSync(s *tgsync.Server, w http.ResponseWriter, r *http.Request)

// SyncService is a sync-service v0.1.0 service listening on 127.0.0.1.
type SyncService struct {
	svc  *tgsync.DefaultService
	http *http.Server
	l    net.Listener
	done chan error
}

// StartSyncService starts the service on 127.0.0.1 and an ephemeral port.
func StartSyncService(ctx context.Context) (*SyncService, error) {
	logging.SetLevel(zapcore.WarnLevel) // the service logs every connection at info
	svc, err := tgsync.NewDefaultService(ctx, logging.S())
	if err != nil {
		return nil, err
	}
	srv := new(tgsync.Server)
	if err := setField(srv, "service", svc); err != nil {
		svc.Close()
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		svc.Close()
		return nil, err
	}
	s := &SyncService{svc: svc, l: l, done: make(chan error, 1),
		http: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serveSync(srv, w, r) })}}
	go func() { s.done <- s.http.Serve(l) }()
	return s, nil
}

// setField sets an unexported field of the sync service's Server: the
// handler reads only its service.
func setField(srv *tgsync.Server, name string, v any) error {
	f := reflect.ValueOf(srv).Elem().FieldByName(name)
	if !f.IsValid() || !reflect.TypeOf(v).AssignableTo(f.Type()) {
		return fmt.Errorf("tgrun: sync-service's Server has no field %s of type %T: not v0.1.0?", name, v)
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(v))
	return nil
}

// Host and Port are what instances get as SYNC_SERVICE_HOST and _PORT.
func (s *SyncService) Host() string { return "127.0.0.1" }

// Port is the service's TCP port.
func (s *SyncService) Port() int { return s.l.Addr().(*net.TCPAddr).Port }

// Close stops the service; connections still open are closed.
func (s *SyncService) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.http.Close()
	}
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return errors.Join(err, s.svc.Close())
}
