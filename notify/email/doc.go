// Package email sends notifications over SMTP (go-mail): a UTF-8 subject,
// and the text and HTML renderings as multipart/alternative.
package email
