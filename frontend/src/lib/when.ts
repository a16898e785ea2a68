// Dates in the sidebar: short enough for one line (a mail client's way), in full on hover.

function toDate(v: string | number): Date | null {
  const d = typeof v === 'number' ? new Date(v < 1e12 ? v * 1000 : v) : new Date(v)
  return Number.isNaN(d.getTime()) ? null : d
}

/** Today: the time; this year: day and month; before: the short date. */
export function shortWhen(v: string | number, now: Date = new Date(), locale?: string): string {
  const d = toDate(v)
  if (!d) return ''
  if (d.toDateString() === now.toDateString()) {
    return d.toLocaleTimeString(locale, { timeStyle: 'short' })
  }
  if (d.getFullYear() === now.getFullYear()) {
    return d.toLocaleDateString(locale, { day: 'numeric', month: 'short' })
  }
  return d.toLocaleDateString(locale, { dateStyle: 'short' })
}

/** The full date and time, for the tooltip. */
export function fullWhen(v: string | number, locale?: string): string {
  const d = toDate(v)
  return d ? d.toLocaleString(locale, { dateStyle: 'medium', timeStyle: 'short' }) : ''
}
