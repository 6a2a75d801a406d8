package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/ratelimitgen/ratelimitgen/examples/grpcservice/quotepb"
)

// runDemo calls the Quotes service at addr as a client would and prints
// what it sees: alice's Get calls until one is denied, bob's Get, alice's
// List streams until one is denied, and a call that names nobody.
func runDemo(ctx context.Context, w io.Writer, addr string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := pb.NewQuotesClient(conn)
	for i := 1; i <= 4; i++ {
		quote, err := client.Get(as(ctx, "alice"), &pb.GetRequest{})
		report(w, fmt.Sprintf("Get #%d as alice", i), text(quote), err)
	}
	quote, err := client.Get(as(ctx, "bob"), &pb.GetRequest{})
	report(w, "Get as bob", text(quote), err)
	for i := 1; i <= 2; i++ {
		quotes, err := list(as(ctx, "alice"), client, 2)
		report(w, fmt.Sprintf("List #%d as alice", i), fmt.Sprintf("%d quotations", len(quotes)), err)
	}
	quote, err = client.Get(ctx, &pb.GetRequest{})
	report(w, "Get without "+UserHeader, text(quote), err)
	return nil
}

// as returns ctx with the outgoing metadata that names user as the caller.
func as(ctx context.Context, user string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, UserHeader, user)
}

// list reads a List stream of count quotations to its end.
func list(ctx context.Context, client pb.QuotesClient, count int32) ([]*pb.Quote, error) {
	stream, err := client.List(ctx, &pb.ListRequest{Count: count})
	if err != nil {
		return nil, err
	}
	var out []*pb.Quote
	for {
		quote, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, quote)
	}
}

// text returns a quotation as the demo prints it.
func text(q *pb.Quote) string {
	return fmt.Sprintf("%q (%s)", q.GetText(), q.GetAuthor())
}

// report prints the reply of a call that succeeded, or the status it failed with and the
// details of that status.
func report(w io.Writer, call, reply string, err error) {
	if err == nil {
		fmt.Fprintf(w, "%s: OK %s\n", call, reply)
		return
	}
	st := status.Convert(err)
	fmt.Fprintf(w, "%s: %s: %s\n", call, st.Code(), st.Message())
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			fmt.Fprintf(w, "  RetryInfo: retry_delay=%s\n", d.GetRetryDelay().AsDuration())
		case *errdetails.QuotaFailure:
			for _, v := range d.GetViolations() {
				fmt.Fprintf(w, "  QuotaFailure: subject=%q description=%q quota_value=%d\n", v.GetSubject(), v.GetDescription(), v.GetQuotaValue())
			}
		}
	}
}
