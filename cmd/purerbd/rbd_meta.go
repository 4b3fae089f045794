package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd image-meta`: an image's metadata (key/value pairs).

func (c *rbdCommand) imageMeta(ctx context.Context, args []string) error {
	if len(args) < 2 {
		return errors.New("usage: image-meta get|set|remove|list IMAGE [KEY [VALUE]]")
	}
	verb := args[0]
	sp, err := c.parseSpec(args[1], false)
	if err != nil {
		return err
	}
	rest := args[2:]
	ro := verb == "get" || verb == "list" || verb == "ls"
	return c.withImage(ctx, sp, rbd.OpenOptions{ReadOnly: ro}, func(img *rbd.Image) error {
		switch {
		case verb == "get" && len(rest) == 1:
			v, err := img.MetadataGet(ctx, rest[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(c.stdout, v)
			return nil
		case verb == "set" && len(rest) == 2:
			return img.MetadataSet(ctx, rest[0], rest[1])
		case (verb == "remove" || verb == "rm") && len(rest) == 1:
			return img.MetadataRemove(ctx, rest[0])
		case verb == "list" || verb == "ls":
			kvs, err := img.MetadataList(ctx)
			if err != nil {
				return err
			}
			for _, kv := range kvs {
				fmt.Fprintf(c.stdout, "%s\t%s\n", kv.Key, kv.Value)
			}
			return nil
		}
		return errors.New("usage: image-meta get|set|remove|list IMAGE [KEY [VALUE]]")
	})
}
