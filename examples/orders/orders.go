package main

import (
	"context"

	"github.com/etagstore/etagstore"
)

// Order is an order as the order service keeps it.
type Order struct {
	Customer string
	Items    []string
	Total    int64 // cents
}

// OrderPlaced is the event the order service emits with each order.
type OrderPlaced struct {
	Order    string `json:"order"`
	Customer string `json:"customer"`
	Total    int64  `json:"total"`
}

// Service places orders. An order and its OrderPlaced commit in one
// transaction, in one request to the table: both or neither. A crash
// after the commit loses no event (the relay finds it in the outbox), and
// a failed commit announces nothing.
type Service struct {
	Orders *etagstore.Store[Order]
	Events *etagstore.Outbox[OrderPlaced]
}

// Place creates the order key and emits its OrderPlaced.
func (s *Service) Place(ctx context.Context, key string, o Order) error {
	return etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		if err := s.Orders.In(tx).Create(key, o); err != nil {
			return err
		}
		return s.Events.In(tx).Emit(OrderPlaced{Order: key, Customer: o.Customer, Total: o.Total})
	})
}
