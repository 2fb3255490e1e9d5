package pglisten

import (
	"context"
	"errors"
	"testing"

	"github.com/cairnq/cairnq-go/executor"
)

// fakeDelivery is a listening connection and its route, in memory:
// delivered says whether a notification sent reaches the listener.
type fakeDelivery struct {
	delivered bool
	listenErr error
	notifyErr error
	listening string
	notes     chan [2]string
	sent      int
}

func (f *fakeDelivery) delivery() Delivery {
	f.notes = make(chan [2]string, 8)
	return Delivery{
		Listen: func(_ context.Context, ch string) error { f.listening = ch; return f.listenErr },
		Wait: func(ctx context.Context) (string, string, error) {
			select {
			case n := <-f.notes:
				return n[0], n[1], nil
			case <-ctx.Done():
				return "", "", ctx.Err()
			}
		},
		Notify: func(_ context.Context, ch, payload string) error {
			f.sent++
			if f.notifyErr != nil {
				return f.notifyErr
			}
			f.notes <- [2]string{"someone_else", "x"} // another channel's notification, skipped
			if f.delivered && ch == f.listening {
				f.notes <- [2]string{ch, payload}
			}
			return nil
		},
	}
}

func TestCheckDelivery(t *testing.T) {
	ctx := context.Background()
	ok := &fakeDelivery{delivered: true}
	if err := CheckDelivery(ctx, ok.delivery()); err != nil || ok.sent != 1 {
		t.Fatalf("a connection that receives: %v after %d sends", err, ok.sent)
	}
	pooled := &fakeDelivery{}
	err := CheckDelivery(ctx, pooled.delivery())
	if !errors.Is(err, executor.ErrTransactionPooler) || !errors.Is(err, executor.ErrListenUnavailable) || pooled.sent != 1 {
		t.Fatalf("a connection that never receives: %v after %d sends; want ErrTransactionPooler after one", err, pooled.sent)
	}
	down := errors.New("down")
	if err := CheckDelivery(ctx, (&fakeDelivery{notifyErr: down}).delivery()); !errors.Is(err, down) || errors.Is(err, executor.ErrListenUnavailable) {
		t.Fatalf("a failed send: %v, want it as it is (not permanent)", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := CheckDelivery(canceled, (&fakeDelivery{}).delivery()); errors.Is(err, executor.ErrTransactionPooler) {
		t.Fatalf("a canceled check: %v, must not read as a pooler", err)
	}
}
