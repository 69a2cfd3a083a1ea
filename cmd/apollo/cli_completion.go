package main

import (
	"github.com/spf13/cobra"
)

// newCompletionCmd replaces cobra's default completion command, so that
// one help page tells how to install completion in every shell.
func newCompletionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print the shell completion script",
		Long: `Print a script that makes your shell complete apollo's commands and flags,
and task IDs from the server (apollo task <TAB>).

bash (needs the bash-completion package):
  this shell:     source <(apollo completion bash)
  every shell:    apollo completion bash > /etc/bash_completion.d/apollo          # Linux
                  apollo completion bash > $(brew --prefix)/etc/bash_completion.d/apollo   # macOS

zsh:
  once, if not done yet:  echo "autoload -U compinit; compinit" >> ~/.zshrc
  every shell:    apollo completion zsh > "${fpath[1]}/_apollo"
  then start a new shell.

fish:
  this shell:     apollo completion fish | source
  every shell:    apollo completion fish > ~/.config/fish/completions/apollo.fish

PowerShell:
  this shell:     apollo completion powershell | Out-String | Invoke-Expression
  every shell:    add the line above to your PowerShell profile ($PROFILE).

Exit codes: 0 ok, 2 unknown shell.`,
		Example: `  source <(apollo completion bash)
  apollo completion zsh > "${fpath[1]}/_apollo"`,
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, out := cmd.Root(), cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			}
			return root.GenPowerShellCompletionWithDesc(out)
		},
	}
	return cmd
}
