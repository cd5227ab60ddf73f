package accesslog

// months maps the three letters of a month to its number.
var months = map[[3]byte]int{
	{'J', 'a', 'n'}: 1, {'F', 'e', 'b'}: 2, {'M', 'a', 'r'}: 3, {'A', 'p', 'r'}: 4,
	{'M', 'a', 'y'}: 5, {'J', 'u', 'n'}: 6, {'J', 'u', 'l'}: 7, {'A', 'u', 'g'}: 8,
	{'S', 'e', 'p'}: 9, {'O', 'c', 't'}: 10, {'N', 'o', 'v'}: 11, {'D', 'e', 'c'}: 12,
}

// time converts "dd/Mon/yyyy:hh:mm:ss +zzzz" to Unix nanoseconds,
// reusing the last conversion when the stamp repeats (a busy log logs
// many lines a second).
func (c *Combined) time(s []byte) (int64, bool) {
	if string(s) == string(c.lastStamp[:]) {
		return c.lastTime, true
	}
	t, ok := parseStamp(s)
	if ok {
		copy(c.lastStamp[:], s)
		c.lastTime = t
	}
	return t, ok
}

// parseStamp converts a 26-byte "dd/Mon/yyyy:hh:mm:ss +zzzz".
func parseStamp(s []byte) (int64, bool) {
	if len(s) != 26 || s[2] != '/' || s[6] != '/' || s[11] != ':' || s[14] != ':' || s[17] != ':' || s[20] != ' ' || (s[21] != '+' && s[21] != '-') {
		return 0, false
	}
	num := func(i, n int) int {
		v := 0
		for _, b := range s[i : i+n] {
			if !isDigit(b) {
				return -1
			}
			v = v*10 + int(b-'0')
		}
		return v
	}
	day, year, hour, minute, sec := num(0, 2), num(7, 4), num(12, 2), num(15, 2), num(18, 2)
	zh, zm := num(22, 2), num(24, 2)
	month := months[[3]byte{s[3], s[4], s[5]}]
	if month == 0 || day < 1 || day > daysIn(year, month) || year < 1970 || hour > 23 || minute > 59 || sec > 60 || zh < 0 || zh > 23 || zm < 0 || zm > 59 {
		return 0, false
	}
	unix := daysFromCivil(year, month, day)*86400 + int64(hour*3600+minute*60+sec)
	off := int64(zh*3600 + zm*60)
	if s[21] == '+' {
		unix -= off
	} else {
		unix += off
	}
	return unix * 1e9, true
}

// daysIn returns the number of days of month in year.
func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns the days from 1970-01-01 to the date (Howard
// Hinnant's algorithm, for the proleptic Gregorian calendar).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era*146097 + doe - 719468)
}
