// Package feishu sends notifications to a Feishu (Lark) group through a
// custom bot's webhook, as an interactive card or as text, optionally
// signed.
package feishu
