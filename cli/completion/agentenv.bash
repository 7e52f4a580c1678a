# bash completion for agentenv: commands and each command's flags, read
# from the program's own --help (so it never disagrees with the binary).
_agentenv() {
  local cur=${COMP_WORDS[COMP_CWORD]} cmd="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      --root) ((i++)) ;;
      -*) ;;
      *) cmd=${COMP_WORDS[i]}; break ;;
    esac
  done
  if [[ -z $cmd ]]; then
    if [[ $cur == -* ]]; then
      COMPREPLY=($(compgen -W "--root --json --version --help" -- "$cur"))
    else
      COMPREPLY=($(compgen -W "$(agentenv --help 2>/dev/null | awk '/^  [a-z]/ {print $1}')" -- "$cur"))
    fi
    return
  fi
  case ${COMP_WORDS[COMP_CWORD - 1]} in
    --root|--from|--tarball|-o|--output) COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$(agentenv "$cmd" --help 2>/dev/null | grep -o -- '--[a-z][a-z-]*' | sort -u)" -- "$cur"))
  fi
}
complete -o default -F _agentenv agentenv
