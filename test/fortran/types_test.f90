! SPDX-License-Identifier: BSD-3-Clause
! Typed sends and receives, MPI_Pack/Unpack and Allreduce from Fortran
! (`use mpi`), every result checked against a hand-computed reference. Run
! with Veneer preloaded by run_fortran_test.sh, whose report check proves the
! calls went through Veneer.
program types_test
  use mpi
  implicit none
  integer, parameter :: n = 4096, nb = 1200, span = 5 * nb
  integer :: rank, nranks, ierr, left, right, vec, idx, i, k, count, position, flag_count
  integer :: blocklens(nb), displs(nb)
  integer :: status(MPI_STATUS_SIZE), statuses(MPI_STATUS_SIZE, 4), reqs(4), index
  double precision :: sbuf(2 * n), rbuf(2 * n), rbuf2(2 * n), contig(n), packed(n), sums(1000)
  integer :: isend(span), irecv(span), imax(3)
  logical :: done, lflags(2)
  integer :: pairs(2, 2), abs_send, abs_recv
  integer(kind=MPI_ADDRESS_KIND) :: at(1)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  right = mod(rank + 1, nranks)
  left = mod(rank - 1 + nranks, nranks)

  ! Every other double: 8-byte blocks, 32 KiB of data.
  call MPI_Type_vector(n, 1, 2, MPI_DOUBLE_PRECISION, vec, ierr)
  call MPI_Type_commit(vec, ierr)
  ! Blocks of 1, 2, 3 integers every 5 integers.
  do i = 1, nb
    blocklens(i) = mod(i - 1, 3) + 1
    displs(i) = 5 * (i - 1)
  end do
  call MPI_Type_indexed(nb, blocklens, displs, MPI_INTEGER, idx, ierr)
  call MPI_Type_commit(idx, ierr)

  do i = 1, 2 * n
    sbuf(i) = value(rank, i)
  end do
  do i = 1, span
    isend(i) = 1000000 * (rank + 1) + i
  end do

  ! 1. Send / Recv of the vector (even ranks send first).
  rbuf = -1d0
  if (mod(rank, 2) == 0) then
    call MPI_Send(sbuf, 1, vec, right, 7, MPI_COMM_WORLD, ierr)
    call MPI_Recv(rbuf, 1, vec, left, 7, MPI_COMM_WORLD, status, ierr)
  else
    call MPI_Recv(rbuf, 1, vec, left, 7, MPI_COMM_WORLD, status, ierr)
    call MPI_Send(sbuf, 1, vec, right, 7, MPI_COMM_WORLD, ierr)
  end if
  call check(ierr == MPI_SUCCESS, 'send/recv ierror')
  call check(status(MPI_SOURCE) == left .and. status(MPI_TAG) == 7, 'recv status source/tag')
  call MPI_Get_count(status, vec, count, ierr)
  call check(count == 1, 'recv count of vector')
  call MPI_Get_count(status, MPI_DOUBLE_PRECISION, count, ierr)
  call check(count == n, 'recv count of doubles')
  call check_vector(rbuf, left, 'send/recv vector')

  ! 2. Isend / Irecv of both types, completed by Waitall with statuses.
  rbuf = -1d0
  irecv = -1
  call MPI_Irecv(irecv, 1, idx, left, 1, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Irecv(rbuf, 1, vec, right, 2, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Isend(isend, 1, idx, right, 1, MPI_COMM_WORLD, reqs(3), ierr)
  call MPI_Isend(sbuf, 1, vec, left, 2, MPI_COMM_WORLD, reqs(4), ierr)
  call MPI_Waitall(4, reqs, statuses, ierr)
  call check(ierr == MPI_SUCCESS, 'waitall ierror')
  call check(all(reqs == MPI_REQUEST_NULL), 'waitall requests freed')
  call check(statuses(MPI_SOURCE, 1) == left .and. statuses(MPI_TAG, 1) == 1, 'waitall status 1')
  call check(statuses(MPI_SOURCE, 2) == right .and. statuses(MPI_TAG, 2) == 2, 'waitall status 2')
  call MPI_Get_count(statuses(:, 1), MPI_INTEGER, count, ierr)
  call check(count == sum(blocklens), 'waitall count of integers')
  call check_indexed(irecv, left, 'isend/irecv indexed')
  call check_vector(rbuf, right, 'isend/irecv vector')

  ! 3. Irecv completed by Wait (status ignored), by Waitany, and by a Test loop.
  rbuf = -1d0
  call MPI_Irecv(rbuf, 1, vec, left, 3, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(sbuf, 1, vec, right, 3, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
  call check(reqs(1) == MPI_REQUEST_NULL, 'wait request freed')
  call check_vector(rbuf, left, 'irecv + wait')
  call MPI_Waitall(1, reqs(2:2), MPI_STATUSES_IGNORE, ierr)

  irecv = -1
  reqs(1) = MPI_REQUEST_NULL
  call MPI_Irecv(irecv, 1, idx, left, 4, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Isend(isend, 1, idx, right, 4, MPI_COMM_WORLD, reqs(3), ierr)
  call MPI_Waitany(2, reqs(1:2), index, status, ierr)
  call check(index == 2 .and. status(MPI_SOURCE) == left .and. status(MPI_TAG) == 4, 'waitany index/status')
  call check_indexed(irecv, left, 'irecv + waitany')
  call MPI_Wait(reqs(3), status, ierr)

  rbuf = -1d0
  call MPI_Irecv(rbuf, 1, vec, right, 5, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(sbuf, 1, vec, left, 5, MPI_COMM_WORLD, reqs(2), ierr)
  done = .false.
  flag_count = 0
  do while (.not. done)
    call MPI_Test(reqs(1), done, status, ierr)
    flag_count = flag_count + 1
  end do
  call check(status(MPI_SOURCE) == right .and. status(MPI_TAG) == 5, 'test status')
  call check_vector(rbuf, right, 'irecv + test')
  call MPI_Wait(reqs(2), MPI_STATUS_IGNORE, ierr)

  ! 3b. Sendrecv at MPI_BOTTOM: types holding the buffers' absolute addresses.
  rbuf = -1d0
  call MPI_Get_address(sbuf(1), at(1), ierr)
  call MPI_Type_create_hindexed(1, [1], at, vec, abs_send, ierr)
  call MPI_Get_address(rbuf(1), at(1), ierr)
  call MPI_Type_create_hindexed(1, [1], at, vec, abs_recv, ierr)
  call MPI_Type_commit(abs_send, ierr)
  call MPI_Type_commit(abs_recv, ierr)
  call MPI_Sendrecv(MPI_BOTTOM, 1, abs_send, right, 8, MPI_BOTTOM, 1, abs_recv, left, 8, MPI_COMM_WORLD, status, ierr)
  call check(ierr == MPI_SUCCESS .and. status(MPI_SOURCE) == left .and. status(MPI_TAG) == 8, 'sendrecv status')
  call check_vector(rbuf, left, 'sendrecv at MPI_BOTTOM')
  call MPI_Type_free(abs_send, ierr)
  call MPI_Type_free(abs_recv, ierr)

  ! 4. Pack / Unpack: the packed stream is the vector's doubles in order.
  position = 0
  call MPI_Pack(sbuf, 1, vec, packed, 8 * n, position, MPI_COMM_WORLD, ierr)
  call check(ierr == MPI_SUCCESS .and. position == 8 * n, 'pack position')
  position = 0
  call MPI_Unpack(packed, 8 * n, position, contig, n, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  do i = 1, n
    call check(contig(i) == value(rank, 2 * i - 1), 'packed bytes')
  end do
  rbuf2 = -1d0
  position = 0
  call MPI_Unpack(packed, 8 * n, position, rbuf2, 1, vec, MPI_COMM_WORLD, ierr)
  call check(position == 8 * n, 'unpack position')
  call check_vector(rbuf2, rank, 'unpack into vector')

  ! 5. Allreduce: sums of doubles (exact), in place maximum of integers.
  do k = 1, size(sums)
    sums(k) = dble(rank + k)
  end do
  call MPI_Allreduce(MPI_IN_PLACE, sums, size(sums), MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  do k = 1, size(sums)
    call check(sums(k) == dble(nranks * k + nranks * (nranks - 1) / 2), 'allreduce sum')
  end do
  imax = [rank, -rank, 7 * rank]
  call MPI_Allreduce(MPI_IN_PLACE, imax, 3, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  call check(all(imax == [nranks - 1, 0, 7 * (nranks - 1)]), 'allreduce max in place')
  contig(1:4) = [dble(rank), 1d0, 2d0, 3d0]
  call MPI_Allreduce(contig, rbuf, 4, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(all(rbuf(1:4) == [dble(nranks * (nranks - 1) / 2), dble(nranks), 2d0 * nranks, 3d0 * nranks]), &
             'allreduce sum out of place')

  lflags = [rank >= 0, rank == 0]
  call MPI_Allreduce(MPI_IN_PLACE, lflags, 2, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD, ierr)
  call check(lflags(1) .and. .not. lflags(2), 'allreduce land of logicals')
  pairs(:, 1) = [10 * rank, rank]
  pairs(:, 2) = [5, rank]
  call MPI_Allreduce(MPI_IN_PLACE, pairs, 2, MPI_2INTEGER, MPI_MAXLOC, MPI_COMM_WORLD, ierr)
  call check(all(pairs(:, 1) == [10 * (nranks - 1), nranks - 1]) .and. all(pairs(:, 2) == [5, 0]), &
             'allreduce maxloc of integer pairs')

  call MPI_Type_free(vec, ierr)
  call MPI_Type_free(idx, ierr)
  if (rank == 0) print '(a,i0)', 'fortran types_test: ok, ranks ', nranks
  call MPI_Finalize(ierr)

contains

  double precision function value(r, i)
    integer, intent(in) :: r, i
    value = dble(r) * 1d6 + dble(i)
  end function

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    integer :: e
    if (.not. ok) then
      print '(a,i0,2a)', 'fortran types_test: rank ', rank, ' FAILED: ', what
      call MPI_Abort(MPI_COMM_WORLD, 1, e)
    end if
  end subroutine

  ! The odd elements came from rank `from`, the even ones are untouched.
  subroutine check_vector(buf, from, what)
    double precision, intent(in) :: buf(2 * n)
    integer, intent(in) :: from
    character(*), intent(in) :: what
    integer :: j
    do j = 1, n
      call check(buf(2 * j - 1) == value(from, 2 * j - 1) .and. buf(2 * j) == -1d0, what)
    end do
  end subroutine

  subroutine check_indexed(buf, from, what)
    integer, intent(in) :: buf(span)
    integer, intent(in) :: from
    character(*), intent(in) :: what
    integer :: b, j, at
    logical :: inside(span)
    inside = .false.
    do b = 1, nb
      do j = 0, blocklens(b) - 1
        inside(displs(b) + j + 1) = .true.
      end do
    end do
    do at = 1, span
      if (inside(at)) then
        call check(buf(at) == 1000000 * (from + 1) + at, what)
      else
        call check(buf(at) == -1, what)
      end if
    end do
  end subroutine

end program
