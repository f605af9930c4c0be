#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""
gen-completion.py - write the bash completion of bcachefs from the binary.

usage: scripts/gen-completion.py ./bcachefs > build/bcachefs.bash

Nothing here lists a command or an option by hand: everything is read from
what the built binary prints, so the completion cannot drift from it.

  commands       `bcachefs help`: the command table of bcachefs.c
  subcommands    `bcachefs CMD --help`: lines "  NAME ..." (two spaces, a
                 lowercase word) are a command's subcommands (image, fs, data,
                 device)
  options        `bcachefs CMD [SUB] --help`, the usage text printed beside the
                 getopt tables: --long[=VALUE] anywhere; -x at the start of an
                 option line; [-abc] and [-x VALUE] groups; -o.  A subcommand
                 whose --help is its parent's takes the options of its own
                 block in the parent's text plus those outside every block.
                 tests/cli/t39-completion.sh checks every option offered is
                 one the command accepts.
  option values  `bcachefs help-opts`: the option table of libbcachefs/opts.h
                 (enum choices, yes|no, which options are targets, which apply
                 when opening: -o)
  -o words       a command's own -o items beside the table's (fusemount's
                 norebalance, nocopygc, iostats, FUSE's allow_other): in the
                 -o block of its --help, a word that starts a line and ends
                 in ':' ("norebalance: ..."), and words_with_underscores
  word choices   {a|b|c} in a usage line (device set-state's states)

The completion function itself is the template at the end of this file; at
run time it adds target labels read from the filesystem named on the command
line (show-super's member labels, or format's --label values).
"""
import re
import subprocess
import sys


def run(binary, *args):
    p = subprocess.run([binary, *args], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, check=False)
    return p.stdout


def commands(binary):
    out = run(binary, "help")
    # one space is enough: a name as wide as the column (remove-passphrase)
    return re.findall(r"^  ([a-z][a-z0-9-]*) +\S", out, re.M)


def subcommands(text):
    return re.findall(r"^  ([a-z][a-z0-9-]*)(?:\s|$)", text, re.M)


# --name=VALUE takes a value; --name=value (lowercase) is prose, not an option
LONG = re.compile(r"(?:^|[\s\[,|(])(--[a-z][a-z0-9_-]*)(?![a-z0-9_-])(=[A-Z]+|\s[A-Z][A-Z]*\b)?(?!=[a-z])")
SHORT_LINE = re.compile(r"^\s+(-[a-zA-Z])(?:,|\s)", re.M)
SHORT_GROUP = re.compile(r"\[-([a-zA-Z]+)\]")
SHORT_VALUE = re.compile(r"\[(-[a-zA-Z]) [A-Z@]")


def options(text):
    """Options in a usage text: {name: takes_value}."""
    opts = {}
    for m in LONG.finditer(text):
        name, val = m.group(1), bool(m.group(2))
        opts[name] = opts.get(name, False) or val
    for m in SHORT_LINE.finditer(text):
        opts.setdefault(m.group(1), False)
    for m in SHORT_GROUP.finditer(text):
        for ch in m.group(1):
            opts.setdefault("-" + ch, False)
    for m in SHORT_VALUE.finditer(text):
        opts[m.group(1)] = True
    if re.search(r"(?:^\s+|\[|\|\s)-o\s", text, re.M):
        opts["-o"] = True
    return opts


def blocks(text, subs):
    """Split a parent's help into each subcommand's block and the rest."""
    own, rest, cur = {s: "" for s in subs}, "", None
    for line in text.splitlines(keepends=True):
        m = re.match(r"^  ([a-z][a-z0-9-]*)(?:\s|$)", line)
        if m and m.group(1) in own:
            cur = m.group(1)
        elif cur and not re.match(r"^   ", line):
            cur = None
        if cur:
            own[cur] += line
        else:
            rest += line
    return own, rest


def o_words(text):
    """A command's own -o items, from the -o block of its usage text."""
    m = re.search(r"^\s+-o [A-Z]+\s(.*?)(?=^\s+-[a-zA-Z-]|^\S|\Z)", text, re.M | re.S)
    if not m:
        return []
    block, out = m.group(1), []
    for w in re.findall(r"^\s+([a-z][a-z0-9_]*):\s", block, re.M):
        out.append(w)
    # valued ones are the option table's; "read_bytes=N" is an example output
    for w, eq in re.findall(r"\b([a-z][a-z0-9]*_[a-z0-9_]*[a-z0-9])\b(=?)", block):
        if not eq:
            out.append(w)
    return out


def words(text):
    """{a|b|c} choices in the usage line (the text's first line)."""
    out = []
    for m in re.finditer(r"\{([a-z|]+)\}", text.split("\n", 1)[0]):
        out += m.group(1).split("|")
    return out


def option_table(binary):
    """help-opts: {name: (values, where)}."""
    lines = run(binary, "help-opts").splitlines()
    table = {}
    for a, b in zip(lines, lines[1:]):
        m = re.match(r"^  --([a-z0-9_]+)\s", a)
        if not m:
            continue
        vals, _, where = b.strip().rpartition("; ")
        table[m.group(1)] = (vals, [w.strip() for w in where.split(",")])
    return table


def q(s):
    return "'" + s.replace("'", "'\\''") + "'"


def main():
    binary = sys.argv[1]
    cmds = commands(binary)
    listing = run(binary, "help")
    opts, subs, choices, owords = {}, {}, {}, {}
    for c in cmds:
        text = run(binary, c, "--help")
        if text == listing or text.startswith(listing.split("\n", 1)[0]):
            continue	# help: the command list itself
        s = subcommands(text)
        if not s:
            opts[c] = options(text)
            choices[c] = words(text)
            owords[c] = o_words(text)
            continue
        subs[c] = s
        own, rest = blocks(text, s)
        common = options(rest)
        for sub in s:
            stext = run(binary, c, sub, "--help")
            body = own[sub] if stext == text else stext
            o = dict(common)
            o.update(options(body))
            opts[c + " " + sub] = o
            choices[c + " " + sub] = words(body)

    table = option_table(binary)
    enums, targets, open_opts = {}, [], []
    for name, (vals, where) in table.items():
        m = re.match(r"^([a-z0-9_]+(?:\|[a-z0-9_]+)+), default", vals)
        if m:
            enums[name] = m.group(1).replace("|", " ")
        elif vals.startswith("label or device"):
            targets.append(name)
        if "open" in where or "runtime" in where:
            is_bool = enums.get(name) == "yes no"
            open_opts.append(name if is_bool else name + "=")

    print("# bash completion for bcachefs: generated by scripts/gen-completion.py")
    print("# from the binary's own tables (do not edit; make regenerates it).")
    print("_bcachefs_cmds=" + q(" ".join(cmds)))
    print("declare -gA _bcachefs_subs=(")
    for c, s in subs.items():
        print(f"\t[{q(c)}]={q(' '.join(s))}")
    print(")")
    print("declare -gA _bcachefs_opts=(")
    for k, o in opts.items():
        ws = [n + "=" if v and n.startswith("--") else n for n, v in sorted(o.items())]
        print(f"\t[{q(k)}]={q(' '.join(ws))}")
    print(")")
    print("# options that take a value as the next word (-o OPTS, --label L)")
    print("declare -gA _bcachefs_valopts=(")
    for k, o in opts.items():
        print(f"\t[{q(k)}]={q(' '.join(sorted(n for n, v in o.items() if v)))}")
    print(")")
    print("declare -gA _bcachefs_words=(")
    for k, w in choices.items():
        if w:
            print(f"\t[{q(k)}]={q(' '.join(w))}")
    print(")")
    print("declare -gA _bcachefs_enums=(")
    for n, v in sorted(enums.items()):
        print(f"\t[{q(n)}]={q(v)}")
    print(")")
    print("_bcachefs_targets=" + q(" ".join(targets)))
    print("_bcachefs_open_opts=" + q(" ".join(["ro"] + open_opts)))
    print("# a command's own -o items, beside the open options")
    print("declare -gA _bcachefs_oopts=(")
    for k, w in owords.items():
        extra = [x for x in dict.fromkeys(w) if x not in open_opts and x + "=" not in open_opts]
        if extra:
            print(f"\t[{q(k)}]={q(' '.join(extra))}")
    print(")")
    print(TEMPLATE, end="")


TEMPLATE = r'''
# Labels of the filesystem named on the command line ($1...: the words),
# with their dotted prefixes (ssd for ssd.fast): format's --label values,
# else the member labels show-super prints for the first existing path.
_bcachefs_labels()
{
	local w l labels= prev=
	for w in "$@"; do
		case $w in
		--label=*) labels+=" ${w#--label=}" ;;
		esac
		[[ $prev == --label ]] && labels+=" $w"
		prev=$w
	done
	if [[ -z $labels ]]; then
		for w in "$@"; do
			[[ $w == -* ]] && continue
			w=${w%%:*}
			if [[ -e $w ]]; then
				labels=$("${_bcachefs_bin:-bcachefs}" show-super "$w" 2>/dev/null |
					sed -n 's/^    Label: *\([^ ]\)/\1/p')
				break
			fi
		done
	fi
	for l in $labels; do
		echo "$l"
		while [[ $l == *.* ]]; do
			l=${l%.*}
			echo "$l"
		done
	done | sort -u
}

# The value of option $1 (dashes or underscores, with its leading dashes).
_bcachefs_value()
{
	local opt=${1#-} cur=$2
	shift 2
	opt=${opt#-}
	opt=${opt//-/_}
	case $opt in
	o)
		# comma-separated: complete the last item
		local head= item=$cur
		if [[ $cur == *,* ]]; then
			head=${cur%,*},
			item=${cur##*,}
		fi
		if [[ $item == *=* ]]; then
			_bcachefs_value "${item%%=*}" "${item#*=}" "$@"
			local i
			for i in "${!COMPREPLY[@]}"; do
				COMPREPLY[i]=$head${item%%=*}=${COMPREPLY[i]}
			done
			return
		fi
		COMPREPLY=($(compgen -P "$head" -W "$_bcachefs_open_opts ${_bcachefs_oopts[$_bcachefs_key]}" -- "$item"))
		compopt -o nospace 2>/dev/null
		return
		;;
	source|cache|C)
		COMPREPLY=($(compgen -d -- "$cur"))
		compopt -o filenames 2>/dev/null
		return
		;;
	esac
	if [[ -n ${_bcachefs_enums[$opt]} ]]; then
		COMPREPLY=($(compgen -W "${_bcachefs_enums[$opt]}" -- "$cur"))
	elif [[ " $_bcachefs_targets " == *" $opt "* ]]; then
		COMPREPLY=($(compgen -W "none $(_bcachefs_labels "$@")" -- "$cur"))
	else
		COMPREPLY=()
	fi
}

_bcachefs()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local prog=${COMP_WORDS[0]##*/} cmd= sub= key i w
	local -a line=()
	COMPREPLY=()
	_bcachefs_key=

	# the words before the cursor, with bash's = and : splits joined again
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		if [[ ${#line[@]} -gt 0 && ( $w == [=:] || ${line[-1]} == *[=:] ) ]]; then
			line[-1]+=$w
		else
			line+=("$w")
		fi
	done
	# --opt=VALUE, -o a,opt=VALUE, setopt opt=VALUE: bash split it at "="
	if [[ $cur == = ]]; then
		w=$prev
		[[ $w != -* ]] && w=${w##*,}
		_bcachefs_value "$w" "" "${line[@]}"
		return
	fi
	if [[ $prev == = && $COMP_CWORD -ge 2 ]]; then
		w=${COMP_WORDS[COMP_CWORD-2]}
		[[ $w != -* ]] && w=${w##*,}
		_bcachefs_value "$w" "$cur" "${line[@]}"
		return
	fi

	case $prog in
	mkfs.bcachefs) cmd=format ;;
	fsck.bcachefs) cmd=fsck ;;
	esac
	local n=0
	for w in "${line[@]}"; do
		[[ $w == -* ]] && continue
		if [[ -z $cmd ]]; then
			cmd=$w
		elif [[ -n ${_bcachefs_subs[$cmd]} && -z $sub ]]; then
			sub=$w
		fi
		n=$((n + 1))
	done
	if [[ -z $cmd ]]; then
		COMPREPLY=($(compgen -W "$_bcachefs_cmds" -- "$cur"))
		return
	fi
	if [[ -n ${_bcachefs_subs[$cmd]} && -z $sub ]]; then
		COMPREPLY=($(compgen -W "${_bcachefs_subs[$cmd]}" -- "$cur"))
		return
	fi
	key=$cmd${sub:+ $sub}
	_bcachefs_key=$key	# _bcachefs_value: whose -o items

	if [[ $cur == --*=* ]]; then
		_bcachefs_value "${cur%%=*}" "${cur#*=}" "${line[@]}"
		local v=${cur%%=*}=
		for i in "${!COMPREPLY[@]}"; do
			COMPREPLY[i]=$v${COMPREPLY[i]}
		done
		return
	fi
	if [[ $prev == -* && " ${_bcachefs_valopts[$key]} " == *" $prev "* ]]; then
		_bcachefs_value "$prev" "$cur" "${line[@]}"
		return
	fi
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "${_bcachefs_opts[$key]}" -- "$cur"))
		[[ ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
		return
	fi
	# image setopt OPT=VALUE: the per-file options
	if [[ $key == "image setopt" && $cur == *=* ]]; then
		_bcachefs_value "${cur%%=*}" "${cur#*=}" "${line[@]}"
		local v=${cur%%=*}=
		for i in "${!COMPREPLY[@]}"; do
			COMPREPLY[i]=$v${COMPREPLY[i]}
		done
		return
	fi
	COMPREPLY=($(compgen -W "${_bcachefs_words[$key]}" -- "$cur"))
	COMPREPLY+=($(compgen -f -- "$cur"))
	compopt -o filenames 2>/dev/null
}
complete -F _bcachefs bcachefs mkfs.bcachefs fsck.bcachefs
'''

if __name__ == "__main__":
    main()
